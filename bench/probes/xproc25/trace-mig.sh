#!/usr/bin/env bash
# (xproc25) ftrace of the scheduler and task events machine-wide around CMD
# trace.sh OUT CMD... : ftrace instance of scheduler + task events machine-wide around CMD
out=$1; shift
I=/sys/kernel/tracing/instances/xproc25
mkdir -p $I
echo 0 > $I/tracing_on; echo mono > $I/trace_clock; echo 32768 > $I/buffer_size_kb; echo > $I/trace; echo > $I/set_event
for e in sched:sched_migrate_task task:task_newtask sched:sched_process_exit; do echo $e >> $I/set_event; done
echo 1 > $I/tracing_on
"$@"
rc=$?
echo 0 > $I/tracing_on
cat $I/trace > "$out"
echo > $I/set_event; echo > $I/trace
rmdir $I 2>/dev/null
exit $rc
