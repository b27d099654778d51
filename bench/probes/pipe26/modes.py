#!/usr/bin/env python3
# modes.py LOG... : per build, samples split by mode: one CPU (1.5-2.3 M), two CPUs (>=3.0 M), other.
import re, sys, statistics, collections
s = collections.defaultdict(list)
for f in sys.argv[1:]:
    b = None
    for l in open(f):
        m = re.match(r'=== round (\d+) bin (\S+)', l)
        if m: b = m.group(2); continue
        if l.startswith('SAMPLES') and 'notify' in l and b:
            s[b] += [float(x) for x in l.split('|')[-1].split()]
for b, x in sorted(s.items()):
    one = [v for v in x if 1.5e6 <= v < 2.3e6]; two = [v for v in x if v >= 3.0e6]; oth = [v for v in x if v < 1.5e6 or 2.3e6 <= v < 3.0e6]
    md = lambda a: '%.3f' % (statistics.median(a) / 1e6) if a else '-'
    q = lambda a, p: '%.3f' % (sorted(a)[int(p * (len(a) - 1))] / 1e6) if a else '-'
    print('%-6s n=%3d all %s | one-CPU n=%3d med %s (p25 %s p75 %s) | two-CPU n=%3d med %s | other n=%3d' % (b, len(x), md(x), len(one), md(one), q(one, .25), q(one, .75), len(two), md(two), len(oth)))
