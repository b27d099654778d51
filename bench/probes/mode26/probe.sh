#!/usr/bin/env bash
# probe.sh BIN LABEL : one pipeline run with the probe, /proc/stat per-CPU deltas around it
bin=$1; lab=$2
s0=$(grep '^cpu[0-9]' /proc/stat)
ACL_NOTIFY_BENCH_PIPE_PROBE=1 ACL_NOTIFY_SIM_NAMESPACE=mode26-p $bin --only pipeline --match notify --reps 5 --capi none --out /tmp/mode26/res-$lab 2>&1 | grep '^probe\|notify' | sed "s/^/$lab /"
s1=$(grep '^cpu[0-9]' /proc/stat)
paste <(echo "$s0") <(echo "$s1") | awk -v l=$lab '{n=NF/2; printf "%s %s user %d nice %d sys %d idle %d\n", l, $1, $(n+2)-$2, $(n+3)-$3, $(n+4)-$4, $(n+5)-$5}'
ps -eo pid,ni,pcpu,psr,stat,etime,comm --sort=-pcpu | awk 'NR>1 && $5 ~ /R/' | head -5 | sed "s/^/$lab R: /"
