#!/bin/bash
# Line and function coverage of driver/*.c and driver/verbs/*.c, from a gcov-profiled module's
# build directory (default build/mod/debug-gcov/driver: `make coverage`
# builds it with CLANQ_GCOV=y, runs the VM tests, and tests/vm/vm.sh puts
# the .gcda files the VM sent back next to the .gcno files).
#
#   scripts/coverage.sh [DIR]
#
# Prints per-file line and function coverage, the totals, and the
# functions never entered; the gcov reports (*.c.gcov, annotated source
# with branch counts) are left in DIR/gcov/. Counts include what the
# KUnit suites reached by calling the driver's internals directly.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/mod/debug-gcov/driver}
cd "$dir" || { echo "coverage.sh: no $dir" >&2; exit 1; }

ls ./*.gcno >/dev/null 2>&1 ||
	{ echo "coverage.sh: no .gcno files in $dir (build with CLANQ_GCOV=y)" >&2; exit 1; }
ls ./*.gcda >/dev/null 2>&1 ||
	{ echo "coverage.sh: no .gcda files in $dir (no VM run sent any back)" >&2; exit 1; }

# the verbs wire's objects are in verbs/, their .gcda files (sent back
# flat) here: their names are unique in the driver, so link them here
for f in verbs/*.gcno; do [ -e "$f" ] && ln -sf "$f" .; done
srcs=()
for f in "$root"/driver/*.c "$root"/driver/verbs/*.c; do
	b=$(basename "$f" .c)
	[ -f "$b.gcno" ] && srcs+=("$b.c")
done

rm -rf gcov && mkdir -p gcov
# -b: the annotated *.gcov files (in gcov/) get a "function NAME called N"
# line per function; -o ..: the .gcno/.gcda files are here
out=$(cd gcov && gcov -b -o .. "${srcs[@]/#/../}" 2>&1)

# lines: gcov's summary of each driver/*.c ("File" then "Lines executed");
# functions: the "function" lines of each NAME.c.gcov (a header's inline
# functions are in the header's .gcov and not counted)
{
	printf '%s\n' "$out" | awk '
		/^File / { f = $2; gsub(/\047/, "", f); next }
		/^Lines executed:/ && f ~ /\.c$/ {
			pct = $2; sub(/^executed:/, "", pct); sub(/%$/, "", pct)
			b = f; sub(/.*\//, "", b)
			print "L", b, $NF, int($NF * pct / 100 + 0.5)
			f = ""
		}'
	for s in "${srcs[@]}"; do
		awk -v f="$s" '/^function / { print "F", f, $2, ($4 > 0) }' "gcov/$s.gcov"
	done
} | awk '
	$1 == "L" && !($2 in lines) { order[++n] = $2; lines[$2] = $3; lhit[$2] = $4; tl += $3; th += $4 }
	$1 == "F" { nfn[$2]++; nf++; if ($4) { fhit[$2]++; fh++ } else never[++nn] = $2 ": " $3 }
	END {
		printf "%-14s %18s %18s\n", "file", "lines", "functions"
		for (i = 1; i <= n; i++) {
			f = order[i]
			printf "%-14s %5d/%-5d %5.1f%% %5d/%-5d %5.1f%%\n", f,
				lhit[f], lines[f], lines[f] ? 100 * lhit[f] / lines[f] : 0,
				fhit[f], nfn[f], nfn[f] ? 100 * fhit[f] / nfn[f] : 0
		}
		printf "total: lines %d/%d (%.1f%%), functions %d/%d (%.1f%%)\n",
			th, tl, tl ? 100 * th / tl : 0, fh, nf, nf ? 100 * fh / nf : 0
		printf "functions never entered (%d):\n", nn
		for (i = 1; i <= nn; i++)
			printf "  %s\n", never[i]
	}'
echo "lines never run:"
for s in "${srcs[@]}"; do
	awk -F: -v f="$s" '$1 ~ /#####|=====/ { l = l " " ($2 + 0) }
		END { if (l != "") print "  " f ":" l }' "gcov/$s.gcov"
done
echo "annotated sources: $dir/gcov/*.c.gcov"
