#!/usr/bin/env python3
# paired.py A B LOG... : per round, run median of A / run median of B; count, median, wins.
import re, sys, statistics, collections
a, b = sys.argv[1], sys.argv[2]
rs = []
for f in sys.argv[3:]:
    cur = {}; r = None; bn = None
    for l in open(f):
        m = re.match(r'=== round (\d+) bin (\S+)', l)
        if m:
            if m.group(1) != r and cur: rs.append(cur); cur = {}
            r = m.group(1); bn = m.group(2); continue
        if l.startswith('SAMPLES') and 'notify' in l and bn:
            cur[bn] = statistics.median(float(x) for x in l.split('|')[-1].split())
    if cur: rs.append(cur)
x = [c[a] / c[b] for c in rs if a in c and b in c]
print('%s/%s: rounds %d, median ratio %.3f, %s faster in %d, ratios %s' % (a, b, len(x), statistics.median(x), a, sum(v > 1 for v in x), ' '.join('%.2f' % v for v in x)))
