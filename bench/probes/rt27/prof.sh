#!/usr/bin/env bash
# (rt27) perf record (cpu-clock, machine-wide, call graphs) around fed_probe MODE 3000.
# Usage: prof.sh FED_PROBE MODE OUT.data
export ACL_NOTIFY_SIM_NAMESPACE=rt27-prof
perf record -q -a -g -F 19999 -e cpu-clock -o "$3" -- "$1" "$2" 3000
rm -f /dev/shm/*rt27-prof* 2>/dev/null
