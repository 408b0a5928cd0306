#!/bin/bash
# make test: every test, in one report.
#   1. make check   host tests (cmocka under ASan+UBSan and TSan, bench smoke)
#      native-smoke clanq-bench native -q: the library's data path on this
#                   machine's CPUs beside raw shm, UCX, libfabric (no VM)
#      abi-check    the library's ABI against tests/abi/ (abi-compliance-checker)
#   2. make lint    checkpatch --strict, sparse, W=1 -Werror module builds
#   3. tests/pkg    make deb, lintian, the packages installed on this machine:
#                   DKMS builds for each kernel's headers, the library as
#                   installed, man pages (the packages stay installed)
#   4. the VM       one boot of the debug kernel: KUnit, integration tests,
#                   examples, a benchmark smoke run, module unload, kmemleak
#      exec         vm.sh exec (make vm-run): its arguments checked on the
#                   host, then one short stock-kernel boot running a
#                   program linked to libclanq.so.2: its output and its
#                   exit status must come back (tests/vm/exec-test.sh);
#                   then test_namespace whole on the stock kernel (the
#                   debug kernel has no user namespaces)
#      mpi          Open MPI's mpirun running an MPI job of ours on 2 and 4
#                   ranks over the libfabric provider, stock-kernel VM
#                   (tests/vm/mpi-test.sh)
#   5. pkg-vm       the packages (built and installed on this host by the
#                   pkg stage) in the stock-kernel VM, used as non-root
#   6. pair         two debug-kernel VMs wired to each other only, Soft-RoCE
#                   between them: tests/vm/pair.sh on each (the verbs wire)
# Every stage runs even if an earlier one failed; the last line is
# "N passed, N failed" and the exit status is non-zero on any failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CLANQ_RESULTS=$root/build/results.txt
mkdir -p build
: > "$CLANQ_RESULTS"
t0=$(date +%s)

stage() {
	local name=$1 before after rc
	shift
	echo "==== $name"
	before=$(grep -c '^FAIL' "$CLANQ_RESULTS")
	"$@"
	rc=$?
	after=$(grep -c '^FAIL' "$CLANQ_RESULTS")
	# a stage that failed before recording any failure (a build error)
	if [ $rc != 0 ] && [ "$after" = "$before" ]; then
		echo "FAIL $name: exit status $rc" >> "$CLANQ_RESULTS"
	fi
}

stage check	make --no-print-directory check
stage native	make --no-print-directory native-smoke
stage abi	make --no-print-directory abi-check
stage lint	make --no-print-directory lint
stage pkg	tests/pkg/run.sh
stage vm	tests/vm/vm.sh test
stage exec	tests/vm/exec-test.sh
stage mpi	tests/vm/mpi-test.sh
stage pkg-vm	tests/vm/vm.sh pkg
stage pair	tests/vm/vm.sh pair

read -r p f s < <(awk '/^PASS/{p++} /^FAIL/{f++} /^SKIP/{s++} END{print p+0, f+0, s+0}' "$CLANQ_RESULTS")
echo "==== summary ($(( $(date +%s) - t0 )) s; every result in $CLANQ_RESULTS)"
grep '^FAIL' "$CLANQ_RESULTS" | sed 's/^/  /'
echo "$p passed, $f failed, $s skipped"
[ "$f" = 0 ]
