import re, sys, statistics as st, collections
# parse watch.log: window "HH:MM:SS pp=X", then "== cmd", "bench NAME ARGS: rec=R eng=E", "pp=Y"
since = sys.argv[1] if len(sys.argv) > 1 else "00:00:00"
lines = open('/tmp/enq27/watch.log').read().splitlines()
rows = []
t = None; prev_pp = None; cur = None
for l in lines:
    m = re.match(r'^(\d\d:\d\d:\d\d) pp=([\d.]+)', l)
    if m:
        t = m.group(1); prev_pp = float(m.group(2)); continue
    m = re.match(r'^bench (\S+) (.*): rec=([\d.]+) eng=([\d.]+)', l)
    if m:
        cur = (m.group(1) + ' ' + m.group(2).replace('env ', '')).strip(), float(m.group(3)), float(m.group(4)); continue
    m = re.match(r'^pp=([\d.]+)', l)
    if m:
        pp = float(m.group(1))
        if cur and t and t >= since:
            rows.append((t, prev_pp, pp, *cur))
        cur = None; prev_pp = pp
def mode(a, b):
    if a < 200 and b < 200: return 'fast'
    if 400 < a < 1000 and 400 < b < 1000: return 'slow'
    if a > 1000 and b > 1000: return 'starved'
    return 'mixed'
agg = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    agg[mode(r[1], r[2])][r[3]].append((r[4], r[5]))
for m in ['fast', 'slow', 'starved', 'mixed']:
    if m not in agg: continue
    print(f"-- {m}")
    for v, xs in sorted(agg[m].items()):
        rec = [x[0] for x in xs]; eng = [x[1] for x in xs]
        print(f"  {v:60s} n={len(xs):3d} rec {st.median(rec):6.1f} ({min(rec):.1f}-{max(rec):.1f})  eng {st.median(eng):6.1f} ({min(eng):.1f}-{max(eng):.1f})")
# second view: mode by the run's own engine row (same code in base and cand2)
print("== by the run's engine row: fast 8-25 ns, slow > 25, one-CPU-like < 8")
agg2 = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    e = r[5]
    m = 'slow' if e > 25 else ('onecpu' if e < 8 else 'fast')
    agg2[m][r[3]].append((r[4], r[5], r[1], r[2]))
for m in ['fast', 'slow', 'onecpu']:
    if m not in agg2: continue
    print(f"-- {m}")
    for v, xs in sorted(agg2[m].items()):
        rec = [x[0] for x in xs]; eng = [x[1] for x in xs]
        print(f"  {v:60s} n={len(xs):3d} rec {st.median(rec):6.1f} ({min(rec):.1f}-{max(rec):.1f})  eng {st.median(eng):6.1f} ({min(eng):.1f}-{max(eng):.1f})")
print("== by pp (fast: both < 200; slow: both 400-1000), runs whose engine row read < 8 ns (one CPU at work) left out")
agg3 = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    if r[5] < 8: continue
    m = mode(r[1], r[2])
    if m in ('fast', 'slow'):
        agg3[m][r[3]].append((r[4], r[5]))
for m in ['fast', 'slow']:
    print(f"-- {m}")
    for v, xs in sorted(agg3[m].items()):
        rec = [x[0] for x in xs]; eng = [x[1] for x in xs]
        print(f"  {v:60s} n={len(xs):3d} rec {st.median(rec):6.1f} ({min(rec):.1f}-{max(rec):.1f})  eng {st.median(eng):6.1f} ({min(eng):.1f}-{max(eng):.1f})")
