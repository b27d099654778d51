#!/usr/bin/env python3
"""(rt27) The two processes' host turns per chunk, from fed_probe's STALL_LOG files.
stall.py PREFIX: per chunk k, A's and B's stall (bump start -> bump return: the worker off its
chain for its host's turn), their overlap, the gap between A's bump and B's, and the chunk's
period (A's bump k to A's bump k+1); medians."""
import sys, statistics as st
def load(p):
    d = {}
    for l in open(p):
        i, t0, w, s, t1 = map(int, l.split())
        d[i] = (t0, w, s, t1)
    return d
A, B = load(sys.argv[1] + '.A'), load(sys.argv[1] + '.B')
ks = sorted(k for k in A if k in B and k > 2 and k + 1 in A)
rows = {n: [] for n in ('period', 'stallA', 'stallB', 'overlap', 'union', 'startB-startA',
                       'wakeA', 'awakeA', 'backA', 'wakeB', 'awakeB', 'backB', 'between')}
for k in ks:
    a, b = A[k], B[k]
    rows['period'].append(A[k + 1][0] - a[0])
    rows['stallA'].append(a[3] - a[0]); rows['stallB'].append(b[3] - b[0])
    ov = min(a[3], b[3]) - max(a[0], b[0])
    rows['overlap'].append(max(ov, 0))
    rows['union'].append(max(a[3], b[3]) - min(a[0], b[0]) if ov > 0 else (a[3]-a[0]) + (b[3]-b[0]))
    rows['startB-startA'].append(b[0] - a[0])
    for n, x in (('A', a), ('B', b)):
        rows['wake' + n].append(x[1] - x[0]); rows['awake' + n].append(x[2] - x[1]); rows['back' + n].append(x[3] - x[2])
    rows['between'].append(A[k + 1][0] - max(a[3], b[3]))
for n, v in rows.items():
    v = sorted(v)
    print(f"{n:>14}: p10 {v[len(v)//10]:7d}  p50 {st.median(v):9.0f}  p90 {v[len(v)*9//10]:7d}  mean {st.mean(v):9.0f} ns")
