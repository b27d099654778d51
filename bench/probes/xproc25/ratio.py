#!/usr/bin/env python3
# ratio.py FILE: per run, judged ratios: xproc (case / hybrid placed), inproc, rings, wake; handoff %, pipeline
import re, sys, statistics, collections
runs = []; cur = None; g = None
for l in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) bin (\S+)', l)
    if m: cur = {'bin': m.group(2).split('-')[-1], 'round': m.group(1)}; runs.append(cur); continue
    m = re.match(r'== \[(\S+)\]', l)
    if m: g = m.group(1); continue
    m = re.match(r'\s+(.*?)\s+(case|info|baseline|floor)\s+([0-9.]+)', l)
    if m and g and cur is not None: cur[(g, m.group(1))] = float(m.group(3))
def get(r, g, sub, kind=None):
    for (gg, k), v in [(k, v) for k, v in r.items() if isinstance(k, tuple)]:
        if gg == g and sub in k: return v
    return None
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for r in runs:
    out = {}
    c = get(r, 'xproc', 'hosts feeding'); h = get(r, 'xproc', 'hybrid, threads placed'); hh = get(r, 'xproc', 'hybrid'); 
    if c and h: out['xproc'] = c / min(h, hh or h)
    c = get(r, 'inproc', 'host feeding, default'); h = get(r, 'inproc', 'hybrid, threads placed'); hh = get(r, 'inproc', 'hybrid')
    if c and h: out['inproc'] = c / min(h, hh or h)
    for n in (2, 4, 8, 16):
        c = get(r, 'ring.%d' % n, 'notify: ring'); s = get(r, 'ring.%d' % n, 'POSIX')
        if c and s: out['ring%d' % n] = c / s
    a = get(r, 'wake', 'record task -> waiter resumes, workers'); b = get(r, 'wake', 'record task -> waiter resumes')
    x = get(r, 'wake', 'raw FUTEX_WAKE -> sleeper resumes, threads'); y = get(r, 'wake', 'raw FUTEX_WAKE -> sleeper resumes')
    if a and x: out['wake'] = min(a, b) / min(x, y)
    c = get(r, 'handoff', 'host feeding, default'); h = get(r, 'handoff', 'hybrid: ring of 8 flag pairs, 2 threads placed'); hh = get(r, 'handoff', 'hybrid: ring of 8 flag pairs, 2 threads')
    if c and h: out['handoff%'] = 100 * c / max(h, hh or h)
    c = get(r, 'pipeline', 'notify: 4 streams')
    if c: out['pipeM'] = c / 1e6
    c = get(r, 'idlecpu', 'stream waiting')
    if c is not None: out['idle%'] = c
    c = get(r, 'enqueue', 'record enqueued')
    if c: out['enq'] = c
    for k in ('xproc',):
        c = get(r, 'xproc', 'hosts feeding')
        if c: out['xproc_ns'] = c
    print(r['round'], r['bin'], ' '.join('%s=%.3g' % kv for kv in out.items()))
    for k, v in out.items(): rows[k][r['bin']].append(v)
print()
for k in rows:
    print('%-9s' % k, '  '.join('%s med %.3g (n=%d)' % (b, statistics.median(v), len(v)) for b, v in rows[k].items()))
