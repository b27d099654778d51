#!/bin/bash
# probe.sh BIN LABEL [taskset args]
BIN=$1; L=$2; shift 2
export ACL_NOTIFY_SIM_NAMESPACE=enq26-p$$
pp1=$(/tmp/enq26/pp 0 1)
"$@" $BIN --only enqueue --capi none --reps 5 --out /tmp/enq26/out-$L > /tmp/enq26/run-$L.txt 2>&1 &
pid=$!
case $L in b*) s=nosampler ;; *) s=$(python3 /tmp/enq26/samp.py $pid) ;; esac
wait $pid
pp2=$(/tmp/enq26/pp 0 1)
rec=$(grep "running stream, default settings case" /tmp/enq26/run-$L.txt | awk '{print $(NF-3)}')
eng=$(grep "no-op job, stream running info" /tmp/enq26/run-$L.txt | tail -1 | awk '{print $(NF-3)}')
echo "$(date +%H:%M:%S) $L pp=$pp1/$pp2 rec=$rec eng=$eng  $s"
rm -f /dev/shm/*enq26-p$$* 2>/dev/null
