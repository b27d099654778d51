#!/usr/bin/env bash
# two nice-19 busy loops (this helper's own, killed by pid) beside one run of $MODE26_BIN (default /tmp/mode26/A); ARGS as the bench's
nice -n 19 sh -c 'while :; do :; done' & l1=$!
nice -n 19 sh -c 'while :; do :; done' & l2=$!
sleep 0.3
${MODE26_BIN:-/tmp/mode26/A} "$@"; rc=$?
kill $l1 $l2; wait $l1 $l2 2>/dev/null
exit $rc
