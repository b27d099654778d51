#!/usr/bin/env bash
for i in 1 2 3; do for b in main rev; do echo "=== $b $i"; ACL_NOTIFY_BENCH_PIPE_PROBE=1 ACL_NOTIFY_SIM_NAMESPACE=pipe26-q /tmp/pipe26-$b --only pipeline --match notify --reps 5 --capi none --out /tmp/pipe26/res-q 2>&1 | grep -v '^\s*\[\|^==\|group\|note\|^ *$\|variant\|Targets'; done; done
