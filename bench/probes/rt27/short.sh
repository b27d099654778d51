#!/usr/bin/env bash
# (rt27) short probe runs (150 chunks, a bench sample's length) beside a long one and the
# bench's fed xproc row; the line floor before and after.
export ACL_NOTIFY_SIM_NAMESPACE=rt27-short
FP=${FP:-/tmp/rt27/fed_probe}; B=${B:-/tmp/rt27/bench-main}; PP=${PP:-/tmp/rt27/pp}
echo "pp $($PP 0 1)"
for i in 1 2 3 4 5 6; do "$FP" xproc 150 | grep 'xproc A'; done
"$FP" xproc 3000 | grep 'xproc A'
"$B" --only xproc --match feeding --reps 15 --capi none --out /tmp/rt27/short-res | grep -E 'feeding|hybrid, threads placed'
python3 -c "
import json;d=json.load(open('/tmp/rt27/short-res/results.json'))
for g in d['groups']:
  for v in g['variants']:
    if v.get('samples'): print('SAMPLES', v['name'], '|', ' '.join('%.4g'%x for x in v['samples']))"
echo "pp $($PP 0 1)"
rm -f /dev/shm/*rt27-short*
