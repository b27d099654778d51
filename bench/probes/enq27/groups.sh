#!/bin/bash
# groups.sh ROUNDS A B : alternate A and B on the touched groups, pp around each, outputs kept
# (/tmp/enq27/g-<bin>-<time>.txt; the log line names the file)
R=$1; A=$2; B=$3
cd /work/wt/enq27
export ACL_NOTIFY_SIM_NAMESPACE=enq27-g
for i in $(seq 1 $R); do
  [ -e /tmp/enq27/stopg ] && break
  if [ $((i % 2)) -eq 1 ]; then order="$A $B"; else order="$B $A"; fi
  flock /tmp/enq27/build.lock /work/notes/quiet.sh bash -c "
    for x in $order; do
      t=\$(date +%H%M%S)
      p1=\$(/tmp/enq27/pp 0 1)
      /tmp/enq27/\$x --only inproc,xproc,handoff,pipeline --capi none --reps 5 > /tmp/enq27/g-\$x-\$t.txt 2>&1
      p2=\$(/tmp/enq27/pp 0 1)
      echo \"\$(date +%H:%M:%S) round $i \$x pp=\$p1/\$p2 file=g-\$x-\$t.txt\"
    done" >> /tmp/enq27/groups.log 2>&1
  rm -f /dev/shm/*enq27-g* 2>/dev/null
  sleep 20
done
