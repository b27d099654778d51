#!/usr/bin/env python3
"""(rt27) blocks.py PREFIX: per block of 250 chunks, the chain's median time between the two
hosts' turns (A's next bump after the later turn's end), the union of the turns, and how far
A's turn ended before B's; from fed_probe's STALL_LOG files."""
import sys, statistics as st
def load(p):
    d = {}
    for l in open(p):
        i, t0, w, s, t1 = map(int, l.split())
        d[i] = (t0, w, s, t1)
    return d
A, B = load(sys.argv[1] + '.A'), load(sys.argv[1] + '.B')
ks = sorted(k for k in A if k in B and k > 2 and k + 1 in A)
for blk in range(0, max(ks) + 1, 250):
    v = [k for k in ks if blk <= k < blk + 250]
    if not v:
        continue
    bt = [A[k + 1][0] - max(A[k][3], B[k][3]) for k in v]
    un = [max(A[k][3], B[k][3]) - min(A[k][0], B[k][0]) for k in v]
    ab = [A[k][3] - B[k][3] for k in v]
    per = [A[k + 1][0] - A[k][0] for k in v]
    print(f"chunks {blk:5d}+: period {st.median(per):6.0f}  chain {st.median(bt):6.0f}  turns {st.median(un):6.0f}  endA-endB {st.median(ab):6.0f} ns")
