#!/bin/bash
# make test's ABI check (make abi-check): libclanq.so.<N> as built now
# against the ABI recorded for soname N in tests/abi/libclanq.so.<N>.dump:
# every exported function's signature and every struct they take or
# return, as the public headers declare them (abi-dumper reads the
# library's DWARF, -public-headers keeps what include/ declares;
# abi-compliance-checker compares). A change that breaks a program
# built against the record fails unless the soname's number went up
# (Makefile SOVERSION), and then the record is made anew:
#     tests/abi/abi-check.sh --record
# Additions that break nothing (a new function, in a new version node)
# pass. Prints cmocka-style lines (tests/results.awk counts them).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
so=${CLANQ_ABI_SO:-build/lib/libclanq.so.$(make --no-print-directory -s print-soversion)}
out=build/abi
mkdir -p "$out"
fails=0
ok() { echo "[       OK ] $1"; }
bad() { echo "[  FAILED  ] $1: $2"; fails=$((fails + 1)); }

[ -n "$so" ] && [ -f "$so" ] || { bad "abi" "no build/lib/libclanq.so.*: make lib"; exit 1; }
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
version=$(make --no-print-directory -s print-version)
record=tests/abi/$soname.dump
abi-dumper "$so" -o "$out/current.dump" -lver "$version" -public-headers include/ \
	> "$out/dumper.log" 2>&1 || { bad "abi dump" "abi-dumper failed: $(tail -n 3 "$out/dumper.log")"; exit 1; }
if [ "${1:-}" = --record ]; then
	cp "$out/current.dump" "$record"
	echo "recorded $record"
	exit 0
fi
if [ ! -f "$record" ]; then
	bad "abi: a record for $soname" "no $record: the soname changed; record its ABI with tests/abi/abi-check.sh --record"
	exit 1
fi
abi-compliance-checker -l libclanq -old "$record" -new "$out/current.dump" \
	-report-path "$out/report.html" > "$out/checker.log" 2>&1
rc=$?
# Warnings too: the checker rates a struct grown at its end as a warning
# when it travels by pointer, but clanq's attribute and option structs
# are the caller's, read by the library: a grown one is read past its end.
counts=$(grep -E '^Total (binary|source) compatibility problems' "$out/checker.log" |
	grep -oE '[0-9]+' | paste -sd+ | bc 2>/dev/null)
if [ $rc -gt 1 ] || [ -z "$counts" ]; then
	bad "abi: $soname as recorded" "abi-compliance-checker failed ($rc): $(tail -n 3 "$out/checker.log")"
elif [ $rc = 0 ] && [ "$counts" = 0 ]; then
	ok "abi: $soname as recorded (functions and the structs they take)"
else
	bad "abi: $soname as recorded" "$(grep -E '^Total' "$out/checker.log" | tr '\n' ' ')- a changed struct or signature breaks programs built for soname ${soname##*.}: raise Makefile's SOVERSION, then tests/abi/abi-check.sh --record (what changed: $out/report.html)"
fi
# the exports are named one by one, each in a version node no newer than
# the package (LIBCLANQ_0.2 for the first, a later node per addition),
# and the package's own node is there
nodes=$(objdump -T "$so" | awk '/ clanq_/ { print $(NF-1) }' | sort -u)
stray=$(for n in $nodes; do
	v=${n#LIBCLANQ_}
	[ "$n" != "$v" ] && [ "$(printf '%s\n%s\n' "$v" "$version" | sort -V | tail -n 1)" = "$version" ] || echo "$n"
done)
if [ -z "$stray" ] && echo "$nodes" | grep -qx "LIBCLANQ_$version"; then
	ok "abi: every export versioned, the newest LIBCLANQ_$version"
else
	bad "abi: every export versioned, the newest LIBCLANQ_$version" "found: $(echo $nodes)"
fi
[ $fails = 0 ]
