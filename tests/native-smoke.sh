#!/bin/bash
# make test's smoke run of `clanq-bench native` (make bench-native runs it
# in full): on this machine's own CPUs, no VM. Its arguments, the quick
# run with every row it must print, and its proof of "no system call"
# watched failing: with a tripwire armed on each ring (as a peer blocked
# in the driver leaves it) every send owes a flush, a system call, and
# the seccomp filter must end the run. Prints cmocka-style lines
# (tests/results.awk counts them). Nothing here depends on speed.
set -u
bench=${1:?usage: native-smoke.sh path/to/clanq-bench}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
ok() { echo "[       OK ] $1"; }
bad() { echo "[  FAILED  ] $1: $2"; fails=$((fails + 1)); }

if "$bench" -q -o "$t/s" native > "$t/table" 2> "$t/err"; then
	ok "clanq-bench -q native"
else
	bad "clanq-bench -q native" "exited $?: $(tail -c 600 "$t/err")"
fi
cat "$t/table"
row() {
	if awk -F, "NR > 1 && ($2) { found = 1 } END { exit !found }" "$t/s.csv"; then
		ok "row: $1"
	else
		bad "row: $1" "no CSV row with $2"
	fi
}
for b in 8 1024; do
	row "lat shm/spin $b B" "\$1 == \"lat\" && \$2 == \"shm\" && \$4 == $b && \$9 > 0 && \$16 == 0"
	row "lat clanq/pio-poll $b B, 0 syscalls, a ratio" \
		"\$1 == \"lat\" && \$2 == \"clanq\" && \$3 == \"pio-poll\" && \$4 == $b && \$9 > 0 && \$16 == 0 && \$18 > 0"
	row "lat ucx/tag-shm $b B" "\$1 == \"lat\" && \$2 == \"ucx\" && \$4 == $b && \$9 > 0"
	row "lat libfabric/shm $b B" "\$1 == \"lat\" && \$2 == \"libfabric\" && \$4 == $b && \$9 > 0"
done
for b in 8 64 4096 4194304; do
	row "bw clanq/pio-poll $b B, 0 syscalls, a ratio" \
		"\$1 == \"bw\" && \$2 == \"clanq\" && \$4 == $b && \$15 > 0 && \$16 == 0 && \$18 > 0"
	row "bw ucx/tag-shm $b B" "\$1 == \"bw\" && \$2 == \"ucx\" && \$4 == $b && \$15 > 0"
done
for i in shm clanq; do
	if grep -Eq "^insns +$i +[a-z-]+ +8 +[0-9]+\.[0-9]" "$t/table"; then
		ok "instructions per message: $i"
	else
		bad "instructions per message: $i" "no insns line"
	fi
done
if grep -q '^# targets' "$t/table" && [ "$(grep -c 'met$' "$t/table")" -ge 5 ]; then
	ok "the targets block"
else
	bad "the targets block" "missing, or fewer than 5 targets judged"
fi

# the proof must be able to fail
CLANQ_BENCH_NATIVE_ARMED=1 "$bench" -q --only clanq native > "$t/armed" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q 'killed by its seccomp filter: a system call on the data path' "$t/armed"; then
	ok "a flush owed on the path is caught (seccomp)"
else
	bad "a flush owed on the path is caught (seccomp)" "exit $rc: $(tail -c 300 "$t/armed")"
fi
"$bench" native extra > "$t/usage" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q 'one command' "$t/usage"; then
	ok "two commands refused"
else
	bad "two commands refused" "exit $rc"
fi
[ $fails = 0 ]
