#!/bin/bash
# One quiet window every ~20 s: main unpinned (no sampler), host on CPU 0 with the stream workers
# moved to CPU 1 (split.sh), everything on CPU 0, main unpinned with the thread sampler.
# Expects /tmp/enq26/{pp,samp.py,probe.sh,split.sh} (gcc -O2 -pthread pp.c -o /tmp/enq26/pp).
cd /work/wt/enq26
rm -f /tmp/enq26/stop
for i in $(seq 1 40); do
  /work/notes/quiet.sh bash -c "/tmp/enq26/probe.sh /tmp/bench-main bm$i; /tmp/enq26/split.sh /tmp/bench-main s$i 0 1; /tmp/enq26/probe.sh /tmp/bench-main p$i taskset -c 0; /tmp/enq26/probe.sh /tmp/bench-main m$i" 2>/dev/null
  [ -e /tmp/enq26/stop ] && break
  sleep 20
done
