#!/usr/bin/env bash
# alt.sh ROUNDS OUT "ARGS" SPEC... : SPEC = label=bin[:ENV=VAL]; each round one quiet.sh window
# running every SPEC in turn (order reversed every other round); sleeps 20 s between windows.
rounds=$1; out=$2; args=$3; shift 3
specs=("$@")
cd /work/wt/pipe26
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 0 ]; then order=$(printf '%s\n' "${specs[@]}" | tac); else order=$(printf '%s\n' "${specs[@]}"); fi
  cat > /tmp/pipe26/round.sh <<EOS
#!/usr/bin/env bash
for spec in $(echo $order); do
  label=\${spec%%=*}; rest=\${spec#*=}; bin=\${rest%%:*}; env=""; [ "\$rest" != "\$bin" ] && env=\${rest#*:}
  echo "=== round $r bin \$label \$(date -u +%T)"
  st0=\$(awk '/^cpu /{print \$9}' /proc/stat)
  env \$env ACL_NOTIFY_SIM_NAMESPACE=pipe26-b \$bin $args --out /tmp/pipe26/res-\$label 2>&1
  st1=\$(awk '/^cpu /{print \$9}' /proc/stat)
  echo "STEAL \$((st1-st0))"
  python3 -c "
import json;d=json.load(open('/tmp/pipe26/res-\$label/results.json'))
for g in d['groups']:
  for v in g['variants']:
    if v.get('samples'): print('SAMPLES', g['id'], '|', v['name'], '|', ' '.join('%.4g'%x for x in v['samples']))"
done
EOS
  chmod +x /tmp/pipe26/round.sh
  /work/notes/quiet.sh /tmp/pipe26/round.sh >> "$out" 2>&1
  sleep 20
done
