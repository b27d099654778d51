#!/usr/bin/env bash
# (rt27) fed_probe xproc 3000, the hosts left to the kernel (A) or pinned where the placement
# put them at chunk 20 (P), alternated A P P A A P; the line floor around.
export ACL_NOTIFY_SIM_NAMESPACE=rt27-pin
FP=${FP:-/tmp/rt27/fed_probe}; PP=${PP:-/tmp/rt27/pp}
echo "pp $($PP 0 1)"
for m in A P P A A P; do
  if [ $m = P ]; then e="PIN_HOST_AT=20"; else e="PIN_HOST_AT=none"; fi
  echo "$m $(env $e "$FP" xproc 3000 | grep -E 'xproc A|bump' | head -2 | tr '\n' ' ')"
done
echo "pp $($PP 0 1)"
rm -f /dev/shm/*rt27-pin*
