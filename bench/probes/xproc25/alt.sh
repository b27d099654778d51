#!/usr/bin/env bash
# alt.sh ROUNDS OUT "ARGS" BIN... : alternations (order reversed every other round), each run
# under quiet.sh + waitq.sh; outputs appended to OUT, with per-sample lists of chosen rows.
rounds=$1; out=$2; args=$3; shift 3
bins=("$@")
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 0 ]; then order=$(printf '%s\n' "${bins[@]}" | tac); else order=$(printf '%s\n' "${bins[@]}"); fi
  for b in $order; do
    echo "=== round $r bin $b $(date -u +%T)" >> "$out"
    /tmp/xproc25/quiet2.sh /tmp/xproc25/waitq.sh "$b" $args --out /tmp/xproc25/alt-res >> "$out" 2>&1
    python3 -c "
import json;d=json.load(open('/tmp/xproc25/alt-res/results.json'))
for g in d['groups']:
  for v in g['variants']:
    if v.get('samples'): print('SAMPLES', g['id'], '|', v['name'], '|', ' '.join('%.4g'%x for x in v['samples']))" >> "$out"
  done
done
