#!/bin/bash
# make test's MPI stage (make mpi): Open MPI, as Debian ships it, running
# a job of ours over the libfabric provider, unmodified. mpi_check
# (provider/tests/mpi_check.c, built by mpicc) and the provider go into
# the stock-kernel VM by vm.sh exec (which packs Open MPI's runtime for a
# program linked to libmpi), where tests/vm/mpi.sh runs mpirun on 2 and
# 4 ranks with --mca pml cm --mca mtl ofi and the provider forced. Its
# checks go to $CLANQ_RESULTS as mpi/<check>, the job's output to stdout.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
results=${CLANQ_RESULTS:-$root/build/results.txt}
t=$root/build/mpi
mkdir -p "$t" "$(dirname "$results")"

fail() { echo "FAIL mpi/$1: $2" | tee -a "$results"; }

if ! make --no-print-directory -s provider build/mpi/mpi_check > "$t/build.log" 2>&1; then
	fail "build" "$(tail -n 5 "$t/build.log")"
	exit 1
fi
# vm.sh exec takes executables: the guest's scripts, copied as such
install -m 755 tests/vm/mpi.sh tests/vm/checks.sh "$t/"
fi_info=$(command -v fi_info) && fi_pingpong=$(command -v fi_pingpong) ||
	{ fail "build" "no fi_info or fi_pingpong (libfabric-bin: make deps)"; exit 1; }

t0=$(date +%s)
CLANQ_EXEC_TIMEOUT=${CLANQ_MPI_TIMEOUT:-1200} tests/vm/vm.sh exec build/mpi/mpi_check \
	build/provider/libclanq-fi.so "$fi_info" "$fi_pingpong" "$t/mpi.sh" "$t/checks.sh" -- 'sh ./mpi.sh' \
	> "$t/out" 2> "$t/vm.log"
rc=$?
grep -v '^\[ *\(OK\|FAILED\) *\]' "$t/out" | sed 's/^/   /'
echo "   mpi run: $(( $(date +%s) - t0 )) s, status $rc"
checks=0 bad=0
while IFS= read -r line; do
	checks=$((checks + 1))
	name=$(sed 's/^\[ *[A-Z]* *\] //' <<<"$line")
	case $line in
	*OK*)	echo "PASS mpi/$name" | tee -a "$results" ;;
	*)	bad=$((bad + 1))
		fail "$name" "$(grep -A1 -F -- "$line" "$t/out" | tail -n 1 | head -c 400)" ;;
	esac
done < <(grep '^\[ *\(OK\|FAILED\) *\]' "$t/out")
# the guest's script ends 1 on a failed check; anything else is the run's
if [ $checks = 0 ] || { [ $rc != 0 ] && [ $bad = 0 ]; }; then
	fail "run" "status $rc, $checks checks: $(tail -n 5 "$t/vm.log" | tr '\n' '|' | head -c 400)"
	exit 1
fi
[ $bad = 0 ] && [ $rc = 0 ]
