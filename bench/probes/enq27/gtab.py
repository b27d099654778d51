import re, sys
log = open('/tmp/enq27/groups.log').read()
def grab(t, p):
    m = re.search(p, t, re.M); return float(m.group(1)) if m else float('nan')
print(f"{'time':8s} {'bin':6s} {'pp':>13s} | {'xproc':>5s} {'hyb':>5s} | {'inproc':>6s} {'hybP':>5s} | {'pipe M/s':>8s} | {'handoff':>7s} {'hyb':>5s}")
for m in re.finditer(r'(\d\d:\d\d:\d\d) round (\d+) (\S+) pp=([\d.]+)/([\d.]+) file=(\S+)', log):
    if m.group(3) not in sys.argv[1:]: continue
    t = open('/tmp/enq27/' + m.group(6)).read()
    x = grab(t, r'notify: 2 processes, hosts feeding, default settings case\s+([\d.]+)')
    xh = grab(t, r'^\s+hybrid\s+baseline\s+([\d.]+)')
    i = grab(t, r'notify: 2 streams, host feeding, default settings case\s+([\d.]+)')
    ih = grab(t, r'hybrid, threads placed\s+baseline\s+([\d.]+)(?![\s\S]*notify: 2 streams, host feeding)')
    p = grab(t, r'notify: 4 streams, host feeding, default settings case\s+([\d.]+)')
    h = grab(t, r'notify: ring of 8 notify pairs, host feeding, default settings case\s+([\d.]+)')
    hh = grab(t, r'hybrid: ring of 8 flag pairs, 2 threads\s+baseline\s+([\d.]+)')
    print(f"{m.group(1)} {m.group(3):6s} {m.group(4):>6s}/{m.group(5):>6s} | {x:5.0f} {xh:5.0f} | {i:6.0f} {ih:5.0f} | {p/1e6:8.2f} | {h:7.2f} {hh:5.1f}")
