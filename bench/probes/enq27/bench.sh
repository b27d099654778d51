#!/bin/bash
# bench.sh BIN [groups] : one bench run, prints the enqueue rows
BIN=$1; G=${2:-enqueue}; shift; shift
out=/tmp/enq27/b-$$.txt
"$@" $BIN --only $G --capi none --reps 5 > $out 2>&1
rec=$(grep "running stream, default settings case" $out | awk '{print $(NF-3)}')
eng=$(grep "no-op job, stream running info" $out | tail -1 | awk '{print $(NF-3)}')
echo "bench $(basename $BIN) $*: rec=$rec eng=$eng"
rm -f $out
