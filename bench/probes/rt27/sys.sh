#!/usr/bin/env bash
export ACL_NOTIFY_SIM_NAMESPACE=rt27-sys
for n in 300 3000; do perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_sched_setattr,syscalls:sys_enter_getcpu,syscalls:sys_enter_rseq,syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield -o /tmp/rt27/sys-$n.perf ${FP:-/tmp/rt27/fed_probe} xproc $n >/dev/null; done
rm -f /dev/shm/*rt27-sys*
