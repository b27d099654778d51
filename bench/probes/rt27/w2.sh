#!/usr/bin/env bash
export ACL_NOTIFY_SIM_NAMESPACE=rt27-w2
echo "pp $(${PP:-/tmp/rt27/pp} 0 1)"
${FP:-/tmp/rt27/fed_probe} inproc 3000
${FP:-/tmp/rt27/fed_probe} handoff 3000
CHUNK=128 ${FP:-/tmp/rt27/fed_probe} xproc 1500 | grep -E 'ns/unit|bump'
CHUNK=32 ${FP:-/tmp/rt27/fed_probe} xproc 6000 | grep -E 'ns/unit|bump'
${FP:-/tmp/rt27/fed_probe} xproc 3000 | grep -E 'ns/unit|bump'
${FP:-/tmp/rt27/fed_probe} hybrid 3000 | grep -E 'ns/unit'
echo "pp $(${PP:-/tmp/rt27/pp} 0 1)"
rm -f /dev/shm/*rt27-w2*
