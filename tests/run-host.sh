#!/bin/bash
# make check: run host test programs, framed like the VM's, and record their
# results in $CLANQ_RESULTS. Each argument is one command line, e.g.
# "build/bench/queue_bench -q"; the program's name names the test.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=${CLANQ_RESULTS:?}
mkdir -p "$(dirname "$results")"
log=$(dirname "$results")/check.log
: > "$log"

for cmd in "$@"; do
	read -r -a argv <<< "$cmd"
	name=host/$(basename "${argv[0]}")
	t0=$(date +%s%N)
	{
		echo "CLANQ-BEGIN $name"
		"${argv[@]}" 2>&1
		echo "CLANQ-END $name rc=$?"
	} >> "$log"
	t=$(( ($(date +%s%N) - t0) / 1000000 ))
	out=$(sed -n "/^CLANQ-BEGIN $(printf '%s' "$name" | sed 's|/|\\/|g')\$/,\$p" "$log" |
		awk -f "$here/results.awk")
	printf '%s\n' "$out" >> "$results"
	printf '  %-34s %6d ms  %s\n' "$name" "$t" \
		"$(printf '%s\n' "$out" | awk '/^PASS/{p++} /^FAIL/{f++} END{print p+0 " passed, " f+0 " failed"}')"
	printf '%s\n' "$out" | grep '^FAIL' | sed 's/^/    /' || true
done

read -r p f < <(awk -f "$here/results.awk" "$log" |
	awk '/^PASS/{p++} /^FAIL/{f++} END{print p+0, f+0}')
echo "check: $p passed, $f failed (log: $log)"
[ "$f" = 0 ]
