import re, statistics as st, collections
rows = collections.defaultdict(list)
for f in ("loop.log", "loop2.log"):
    for line in open(f):
        m = re.search(r"(\d\d:\d\d:\d\d) (\w+?)(\d+) (?:split \S+ )?pp=([\d.]+)/([\d.]+) rec=([\d.]+) eng=([\d.]+)", line)
        if not m: continue
        t, lab, i, a, b, rec, eng = m.groups()
        a, b, rec, eng = map(float, (a, b, rec, eng))
        cfg = {"m": "unpinned (sampled)", "b": "unpinned", "bm": "unpinned", "p": "one CPU (taskset -c 0)", "s": "apart (0/1)"}[lab]
        if f == "loop.log" and lab == "b": cfg = "unpinned base"
        if f == "loop.log" and lab == "m": cfg = "unpinned (sampled)"
        reg = "slow" if min(a, b) > 400 else ("fast" if max(a, b) < 200 else "mixed")
        rows[(cfg, reg)].append((rec, eng, t))
for k in sorted(rows):
    v = rows[k]; r = [x[0] for x in v]; e = [x[1] for x in v]
    print(f"{k[0]:24} {k[1]:5} n={len(v):2} rec med {st.median(r):5.1f} ({min(r):.1f}-{max(r):.1f})  eng med {st.median(e):5.1f} ({min(e):.1f}-{max(e):.1f})")
