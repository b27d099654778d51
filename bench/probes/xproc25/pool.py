# (xproc25) pool.py ROW-SUBSTR FILES...: all samples of a row per binary, pooled (from alt.sh outputs)
import re,sys,statistics,collections
d=collections.defaultdict(list); b=None
for f in sys.argv[2:]:
  for l in open(f):
    m=re.match(r'=== round \d+ bin (\S+)',l)
    if m: b=m.group(1).split('-')[-1]
    if l.startswith('SAMPLES') and sys.argv[1] in l:
        d[b]+= [float(x) for x in l.split('|')[-1].split()]
for b,v in d.items():
    v.sort(); n=len(v)
    print(b, 'n=%d med %.0f p10 %.0f p90 %.0f under450 %d over600 %d'%(n, statistics.median(v), v[n//10], v[n*9//10], sum(x<450 for x in v), sum(x>600 for x in v)))
