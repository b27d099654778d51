#!/bin/bash
# split.sh BIN LABEL HOSTCPU WORKERCPU: host pinned to HOSTCPU, stream workers moved to WORKERCPU
BIN=$1; L=$2; HC=$3; WC=$4
export ACL_NOTIFY_SIM_NAMESPACE=enq26-s$$
pp1=$(/tmp/enq26/pp 0 1)
taskset -c $HC $BIN --only enqueue --capi none --reps 5 --out /tmp/enq26/out-$L > /tmp/enq26/run-$L.txt 2>&1 &
pid=$!
declare -A done
while kill -0 $pid 2>/dev/null; do
  for t in /proc/$pid/task/*; do
    tid=${t##*/}; [ -n "${done[$tid]}" ] && continue
    c=$(cat $t/comm 2>/dev/null)
    case "$c" in acl-sim-d0-s*|bench-enq*) taskset -pc $WC $tid >/dev/null 2>&1 && done[$tid]=1 ;; esac
  done
  [ ${#done[@]} -ge 2 ] && break; sleep 0.001
done
wait $pid
pp2=$(/tmp/enq26/pp 0 1)
rec=$(grep "running stream, default settings case" /tmp/enq26/run-$L.txt | awk '{print $(NF-3)}')
eng=$(grep "no-op job, stream running info" /tmp/enq26/run-$L.txt | tail -1 | awk '{print $(NF-3)}')
echo "$(date +%H:%M:%S) $L split $HC/$WC pp=$pp1/$pp2 rec=$rec eng=$eng moved=${#done[@]}"
rm -f /dev/shm/*enq26-s$$* 2>/dev/null
