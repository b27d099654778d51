#!/usr/bin/env bash
# (rt27) one window: the line floor, fed_probe xproc and hybrid (per-chunk thread stats), then
# the same under perf stat (syscall and scheduler counts; 3000-chunk minus 300-chunk runs, so
# start-up cancels). Usage: probe.sh FED_PROBE OUTDIR
fp=$1; out=$2; mkdir -p "$out"
export ACL_NOTIFY_SIM_NAMESPACE=rt27-probe
ev=context-switches,cpu-migrations,syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield,syscalls:sys_enter_sched_setaffinity
t=$(date -u +%H%M%S)
{
echo "pp $(/tmp/rt27/pp 0 1)"
for m in xproc hybrid; do
  "$fp" $m 3000
  for n in 300 3000; do
    perf stat -x, -e $ev -o "$out/$t-$m-$n.perf" "$fp" $m $n > /dev/null
  done
done
echo "pp $(/tmp/rt27/pp 0 1)"
} > "$out/$t.txt" 2>&1
rm -f /dev/shm/*rt27-probe* 2>/dev/null
echo "$out/$t.txt"
