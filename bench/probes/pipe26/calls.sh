#!/usr/bin/env bash
# calls.sh BIN PATTERN : named call targets (counted) in the first symbol matching PATTERN (nm -S)
line=$(nm -S --demangle "$1" | grep -E "$2" | head -1)
a=$(echo $line | awk '{print $1}'); s=$(echo $line | awk '{print $2}')
objdump -d --no-show-raw-insn -C --start-address=0x$a --stop-address=$(printf '0x%x' $((0x$a + 0x$s))) "$1" | grep -E 'call|jmp.*<[a-z_]' | grep -o '<[^>]*>' | grep -v '_DYNAMIC\|+0x' | sort | uniq -c
