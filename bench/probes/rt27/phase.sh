#!/usr/bin/env bash
# (rt27) three fed_probe xproc runs with the stall log, for the chain's phases over a run.
export ACL_NOTIFY_SIM_NAMESPACE=rt27-phase
FP=${FP:-/tmp/rt27/fed_probe}; PP=${PP:-/tmp/rt27/pp}; out=${OUT:-/tmp/rt27/phase}
echo "pp $($PP 0 1)"
for i in 1 2 3; do STALL_LOG=$out-$i "$FP" xproc 3000 | grep 'xproc A'; done
echo "pp $($PP 0 1)"
rm -f /dev/shm/*rt27-phase*
