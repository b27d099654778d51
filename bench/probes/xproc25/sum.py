#!/usr/bin/env python3
# sum.py FILE [row-substr...]: per (group,row), per binary: median of run medians, and the runs.
import re, sys, statistics, collections
v = collections.defaultdict(list); b = None; g = None
for l in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) bin (\S+)', l)
    if m: b = m.group(2).split('-')[-1]; continue
    m = re.match(r'== \[(\S+)\]', l)
    if m: g = m.group(1); continue
    m = re.match(r'\s+(.*?)\s+(case|info|baseline|floor)\s+([0-9.]+)', l)
    if m and g:
        v[(g, m.group(1), b)].append(float(m.group(3)))
keys = sys.argv[2:]
for (g, k, b), x in sorted(v.items()):
    name = g + ' | ' + k
    if keys and not any(s in name for s in keys): continue
    print('%-78s %-6s %10.4g  %s' % (name[:78], b, statistics.median(x), ' '.join('%.4g' % a for a in x)))
