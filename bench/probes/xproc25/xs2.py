import re, sys, collections, json
# (xproc25) per xproc sample: who preempts whom (prev_state=R), worker sleeps (zz), worker CPUs; the bench binary must be named *xproc25* (its comm)
pat = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
def kv(a): return dict(re.findall(r'(\w+)=(\S+)', a))
ev = []
for l in open(sys.argv[1]):
    m = pat.match(l)
    if m: ev.append((m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))*1e6, m.group(5), m.group(6)))
samples = json.load(open(sys.argv[2]))['groups'][0]['variants'][0]['samples']
main=None; proc={}; children=[]; exits={}; comm={}
for c,p,cpu,t,e,a in ev:
    comm[p]=c
    if e=='task_newtask':
        d=kv(a); np_=int(d['pid']); fl=int(d['clone_flags'],16)
        if main is None and 'xproc25' in c: main=p; proc[p]=p
        if fl & 0x10000: proc[np_]=proc.get(p,p)
        else:
            proc[np_]=np_
            if p==main: children.append((np_,t))
    if e=='sched_process_exit': exits[int(kv(a)['pid'])]=t
ch_ok=[(c,t) for c,t in children if c in exits]
print(len(ch_ok),'children', len(samples),'samples')
off=len(ch_ok)-len(samples)
for i,(ch,t0) in enumerate(ch_ok):
    t1=exits[ch]
    roles={main:'HA', ch:'HB'}
    for p,l in proc.items():
        if comm.get(p,'').startswith('acl-sim'):
            if l==ch: roles[p]='WB'
    # parent worker: the acl-sim thread of main created after t0 - small
    cands=[p for p,l in proc.items() if l==main and comm.get(p,'').startswith('acl-sim')]
    st=collections.Counter()
    cpuof={}
    for c,p,cpu,t,e,a in ev:
        if t<t0 or t>t1 or e!='sched_switch': continue
        d=kv(a); pp=int(d['prev_pid']); nn=int(d['next_pid'])
        for q in (pp,nn):
            if q in cands: roles[q]='WA'
        rp=roles.get(pp); rn=roles.get(nn, 'other')
        if rp and d['prev_state'].startswith('R'): st['%s>%s'%(rn,rp)]+=1
        elif rp: st[rp+'zz']+=1
        if rn in ('WA','WB'): st[rn+'@%d'%cpu]+=1
    s = samples[i-off] if i>=off else None
    keys=['WB>WA','WA>WB','HA>WA','HB>WA','HA>WB','HB>WB','other>WA','other>WB','WAzz','WBzz','WA@0','WA@1','WB@0','WB@1']
    print('%6s %6.1fms '%(round(s) if s else '-', (t1-t0)/1e3) + ' '.join('%s=%d'%(k,st[k]) for k in keys))
