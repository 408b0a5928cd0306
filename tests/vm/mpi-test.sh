#!/bin/bash
# make test's MPI stage (make mpi): Open MPI, as Debian ships it, running
# a job of ours over the libfabric provider, unmodified. mpi_check
# (provider/tests/mpi_check.c, built by mpicc) and the provider go into
# the stock-kernel VM by vm.sh exec (which packs Open MPI's runtime for a
# program linked to libmpi), where tests/vm/mpi.sh runs mpirun on 2 and
# 4 ranks with --mca pml cm --mca mtl ofi and the provider forced. Its
# checks go to $CLANQ_RESULTS as mpi/<check> (failures' reasons are in
# the job's output, on stdout and in build/mpi/out).
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
# none: the script did not run (a status of 0 would read as a pass)
checks=$(grep -c '^\[ *\(OK\|FAILED\) *\]' "$t/out")
if [ "$checks" = 0 ]; then
	fail "run" "status $rc, no checks: $(tail -n 5 "$t/vm.log" | tr '\n' '|' | head -c 400)"
	exit 1
fi
# each check a result, as in the VM's results (tests/results.awk), and a
# status no failed check explains one more failure
{ echo "CLANQ-BEGIN mpi"; cat "$t/out"; echo "CLANQ-END mpi rc=$rc"; } |
	awk -f tests/results.awk | tee -a "$results" > "$t/results"
! grep -q '^FAIL' "$t/results"
