import re, glob, statistics as st, collections, sys
rows = collections.defaultdict(lambda: collections.defaultdict(list))
pats = {
 'xproc case': r'notify: 2 processes, hosts feeding, default settings case\s+([\d.]+)',
 'xproc hybrid': r'^\s+hybrid\s+baseline\s+([\d.]+)',
 'inproc case': r'notify: 2 streams, host feeding, default settings case\s+([\d.]+)',
 'pipeline case': r'notify: 4 streams, host feeding, default settings case\s+([\d.]+)',
 'handoff case': r'notify: ring of 8 notify pairs, host feeding, default settings case\s+([\d.]+)',
 'handoff hybrid': r'hybrid: ring of 8 flag pairs, 2 threads\s+baseline\s+([\d.]+)',
}
log = open('/tmp/enq27/groups.log').read()
modes = {}
for m in re.finditer(r'round (\d+) (\S+) pp=([\d.]+)/([\d.]+) file=(\S+)', log):
    modes[m.group(5)] = (m.group(2), float(m.group(3)), float(m.group(4)))
for fn, (b, p1, p2) in sorted(modes.items()):
    if b not in sys.argv[1:]: continue
    t = open('/tmp/enq27/' + fn).read()
    # mode by the run's own hybrid baselines would need a third build; by pp here
    fast = p1 < 200 and p2 < 200
    for k, p in pats.items():
        mm = re.search(p, t, re.M)
        if mm: rows[k][(b, 'fast' if fast else 'other')].append(float(mm.group(1)))
for k in pats:
    for key, xs in sorted(rows[k].items()):
        print(f"{k:16s} {key[0]:8s} {key[1]:6s} n={len(xs)} median {st.median(xs):10.2f} range {min(xs):.2f}-{max(xs):.2f}")
