#!/usr/bin/env bash
# (rt27) fed_probe inproc, handoff and xproc (3000 chunks each) with the line floor around them.
export ACL_NOTIFY_SIM_NAMESPACE=rt27-inh
FP=${FP:-/tmp/rt27/fed_probe}; PP=${PP:-/tmp/rt27/pp}
echo "pp $($PP 0 1)"
"$FP" inproc 3000
"$FP" handoff 3000
"$FP" xproc 3000 | grep -E 'ns/unit|bump'
"$FP" hybrid 3000 | grep ns/unit
echo "pp $($PP 0 1)"
rm -f /dev/shm/*rt27-inh*
