#!/usr/bin/env python3
# Medians per binary and row from alt.sh's output: rows matching argv[2:] (substrings).
import sys, re, statistics, collections
vals = collections.defaultdict(list)
b = None
for l in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) bin (\S+)', l)
    if m: b = m.group(2); continue
    for key in sys.argv[2:]:
        if key in l and re.search(r'\s(case|info|base\w*)\s', l):
            parts = l.split()
            try:
                i = next(i for i, x in enumerate(parts) if x in ('case', 'info', 'baseline'))
                vals[(key, b)].append(float(parts[i + 1]))
            except (StopIteration, ValueError):
                pass
for (k, b), v in sorted(vals.items()):
    print('%-40s %-22s median %12.1f  n %d  %s' % (k[:40], b, statistics.median(v), len(v), ' '.join('%.4g' % x for x in v)))
