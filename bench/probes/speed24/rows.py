#!/usr/bin/env python3
# Medians of each row per binary from alt.sh's output (argv[1]); argv[2:]: row substrings to keep.
import re, sys, statistics, collections
v = collections.defaultdict(list); b = None
for l in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) bin (\S+)', l)
    if m: b = m.group(2).split('-')[-1]; continue
    m = re.match(r'\s+(.*?)\s+(case|info|baseline)\s+([0-9.]+)', l)
    if m and (len(sys.argv) < 3 or any(k in m.group(1) for k in sys.argv[2:])):
        v[(m.group(1), b)].append(float(m.group(3)))
for (k, b), x in sorted(v.items()):
    print('%-70s %-9s %10.4g  %s' % (k[:70], b, statistics.median(x), ' '.join('%.4g' % a for a in x)))
