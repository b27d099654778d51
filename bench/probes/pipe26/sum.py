#!/usr/bin/env python3
import re, sys, statistics, collections
v = collections.defaultdict(list); b = None; g = None
for l in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) bin (\S+)', l)
    if m: b = m.group(2); continue
    m = re.match(r'== \[(\S+)\]', l)
    if m: g = m.group(1); continue
    m = re.match(r'\s+(.*?)\s+(case|info|baseline|floor)\s+([0-9.]+)', l)
    if m and g:
        v[(g, m.group(1), b)].append(float(m.group(3)))
keys = sys.argv[2:]
for (g, k, b), x in sorted(v.items()):
    name = g + ' | ' + k
    if keys and not any(s in name for s in keys): continue
    print('%-60s %-8s n=%2d med %9.4g  [%s]' % (name[:60], b, len(x), statistics.median(x), ' '.join('%.4g' % a for a in x)))
