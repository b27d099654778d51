#!/usr/bin/env bash
# alt.sh ROUNDS OUT "ARGS" BIN... : ROUNDS alternations of the binaries (order reversed every
# other round), each run under quiet2.sh + waitq.sh; every run's output appended to OUT.
rounds=$1; out=$2; args=$3; shift 3
bins=("$@")
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 0 ]; then order=$(printf '%s\n' "${bins[@]}" | tac); else order=$(printf '%s\n' "${bins[@]}"); fi
  for b in $order; do
    echo "=== round $r bin $b $(date -u +%T)" >> "$out"
    bench/probes/speed24/quiet2.sh bench/probes/speed24/waitq.sh "$b" $args >> "$out" 2>&1
  done
done
