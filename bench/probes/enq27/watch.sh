#!/bin/bash
# watch.sh: every ~15 s a quiet window: pp; if slow (>400 ns) or every 6th window, run the
# commands listed in /tmp/enq27/variants (one per line; '$N' replaced by the probe's burst count),
# order alternating, pp after each.
cd /work/wt/enq27
export ACL_NOTIFY_SIM_NAMESPACE=enq27-w
i=0
while [ ! -e /tmp/enq27/stop ]; do
  i=$((i+1))
  flock /tmp/enq27/build.lock /work/notes/quiet.sh bash -c '
    p=$(/tmp/enq27/pp 0 1); echo "$(date +%H:%M:%S) pp=$p"
    if true; then
      mapfile -t V < /tmp/enq27/variants
      n=${#V[@]}
      for k in $(seq 0 $((n-1))); do
        if [ $(('$i' % 2)) -eq 0 ]; then j=$((n-1-k)); else j=$k; fi
        echo "== ${V[$j]}"; timeout 30 ${V[$j]} 2>&1
        echo "pp=$(/tmp/enq27/pp 0 1)"
      done
    fi' >> /tmp/enq27/watch.log 2>&1
  rm -f /dev/shm/*enq27-* 2>/dev/null
  sleep 15
done
