#!/bin/bash
# Line and function coverage of driver/*.c, from a gcov-profiled module's
# build directory (default build/mod/debug-gcov/driver: `make coverage`
# builds it with CLANQ_GCOV=y, runs the VM tests, and tests/vm/vm.sh puts
# the .gcda files the VM sent back next to the .gcno files).
#
#   scripts/coverage.sh [DIR]
#
# Prints per-file line and function coverage, the totals, and the
# functions never entered; the gcov reports (*.c.gcov, annotated source)
# are left in DIR/gcov/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/mod/debug-gcov/driver}
cd "$dir" || { echo "coverage.sh: no $dir" >&2; exit 1; }

ls ./*.gcno >/dev/null 2>&1 ||
	{ echo "coverage.sh: no .gcno files in $dir (build with CLANQ_GCOV=y)" >&2; exit 1; }
ls ./*.gcda >/dev/null 2>&1 ||
	{ echo "coverage.sh: no .gcda files in $dir (no VM run sent any back)" >&2; exit 1; }

srcs=()
for f in "$root"/driver/*.c; do
	b=$(basename "$f" .c)
	[ -f "$b.gcno" ] && srcs+=("$b.c")
done

mkdir -p gcov
# -f: per-function summaries; -o .: objects (.gcno/.gcda) here; the
# annotated *.gcov files go to gcov/
out=$(cd gcov && gcov -f -o .. "${srcs[@]/#/../}" 2>&1)

# gcov prints a source's function summaries, then its own ("File ...");
# functions of headers' inline code are attributed to the file they were
# emitted in.
printf '%s\n' "$out" | awk '
	/^Function / { fn = $2; gsub(/\047/, "", fn); want = "fn"; next }
	/^File / { f = $2; gsub(/\047/, "", f); want = "file"; next }
	/^Lines executed:/ {
		pct = $2; sub(/^executed:/, "", pct); sub(/%$/, "", pct)
		n = $NF
		if (want == "fn") {
			np++; pfn[np] = fn; phit[np] = (pct + 0 > 0)
		} else if (want == "file" && f ~ /\.c$/ && f !~ /\/include\// && !(f in seen)) {
			sub(/.*\//, "", f)
			seen[f] = 1
			lines[f] = n; lhit[f] = int(n * pct / 100 + 0.5)
			tl += n; th += lhit[f]
			order[++nfiles] = f
			for (i = 1; i <= np; i++) {
				nfn[f]++; nf++
				if (phit[i]) { fhitc[f]++; fh++ } else never[++nnever] = f ": " pfn[i]
			}
			np = 0
		}
		want = ""
		next
	}
	END {
		printf "%-14s %18s %18s\n", "file", "lines", "functions"
		for (i = 1; i <= nfiles; i++) {
			f = order[i]
			printf "%-14s %5d/%-5d %5.1f%% %5d/%-5d %5.1f%%\n", f,
				lhit[f], lines[f], lines[f] ? 100 * lhit[f] / lines[f] : 0,
				fhitc[f], nfn[f], nfn[f] ? 100 * fhitc[f] / nfn[f] : 0
		}
		printf "total: lines %d/%d (%.1f%%), functions %d/%d (%.1f%%)\n",
			th, tl, tl ? 100 * th / tl : 0, fh, nf, nf ? 100 * fh / nf : 0
		printf "functions never entered (%d):\n", nnever
		for (i = 1; i <= nnever; i++)
			printf "  %s\n", never[i]
	}'
echo "annotated sources: $dir/gcov/*.c.gcov"
