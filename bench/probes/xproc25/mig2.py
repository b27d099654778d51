# (xproc25) per xproc sample (child process): the four threads' migrations, by whom (K = the migration stopper: a sched_setaffinity)
import re, sys, collections
pat = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
def kv(a): return dict(re.findall(r'(\w+)=(\S+)', a))
ev=[]
for l in open(sys.argv[1]):
    m=pat.match(l)
    if m: ev.append((m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))*1e6, m.group(5), m.group(6)))
main=None; children=[]; owner={}
for c,p,cpu,t,e,a in ev:
    if e=='task_newtask':
        d=kv(a); np_=int(d['pid']); fl=int(d['clone_flags'],16)
        if main is None: main=np_; owner[np_]=np_; continue
        if fl & 0x10000: owner[np_]=owner.get(p,p)
        else:
            owner[np_]=np_
            if p==main: children.append((np_,t))
for k,(ch,t0) in enumerate(children):
    t1=children[k+1][1] if k+1<len(children) else 1e18
    # workers: A's = thread of main created after t0 and before t1 named acl-sim; B's = thread of ch
    wa=[p for c,p,cpu,t,e,a in ev if e=='task_newtask' and t0<=t<t1 and owner.get(p)==main and p!=main for _ in [0]]
    names={main:'HA',ch:'HB'}
    for c,p,cpu,t,e,a in ev:
        if e=='task_newtask' and t0<=t<t1:
            np_=int(kv(a)['pid'])
            if owner.get(np_)==ch and np_!=ch: names[np_]='WB'
            elif owner.get(np_)==main: names[np_]='WA'
    out=[]
    for c,p,cpu,t,e,a in ev:
        if t<t0 or t>t1 or e!='sched_migrate_task': continue
        d=kv(a); pid=int(d['pid'])
        if pid in names:
            who='self' if p==pid else ('kthread' if c.startswith('migration') else names.get(p,c))
            out.append('%.0f:%s %s>%s(%s)'%((t-t0),names[pid],d['orig_cpu'],d['dest_cpu'],who))
    print(k, ch, ' '.join(out[:14]))
