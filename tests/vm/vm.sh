#!/bin/bash
# Boot clanq in a qemu VM (TCG, no KVM here) and run one job in it.
#
#   vm.sh test    debug kernel (KASAN, lockdep, kmemleak, KUnit): KUnit
#                 suites, then tests/vm/tests.list; results are appended
#                 to $CLANQ_RESULTS; any kernel splat is a failure
#   vm.sh run     stock Debian kernel: load the driver and run the demo
#   vm.sh bench   stock Debian kernel: the benchmarks' tables (bench.sh)
#   vm.sh pkg     stock Debian kernel: the module DKMS built on this host
#                 from the clanq-dkms package, libclanq2 and clanq-tools
#                 installed in the VM by dpkg, used by users who are not
#                 root (pkg.sh); tests/pkg/run.sh builds and installs
#                 the packages first
#   vm.sh pair    two debug-kernel VMs ("a" and "b", one vCPU each) wired
#                 to each other only (a virtio NIC each, joined by UDP
#                 sockets on 127.0.0.1), Soft-RoCE on that link (siw with
#                 CLANQ_PAIR_PROVIDER=siw), then tests/vm/pair.sh in each:
#                 results of both, as vm-pair-a/ and vm-pair-b/; a splat
#                 on either console is a failure
#   vm.sh pair-run  the same with the stock kernel (rxe only: Debian's has
#                 no siw): make run's second part, pair.sh's output live
#   vm.sh shell   debug kernel with the module loaded, at a shell
#   vm.sh exec [PROG...] [-- COMMAND...]
#                 your own programs against the real module: the stock
#                 kernel, the driver loaded with 2 nodes as for `run`,
#                 each PROG (a host binary or script) copied in, then
#                 COMMAND run non-interactively by the guest's sh (the
#                 words joined with spaces, as ssh does; none: the first
#                 PROG) in a directory holding the PROGs, which is first
#                 on PATH beside the tree's examples and tools. Its
#                 output (stdout and stderr, as the console carries them)
#                 is on stdout, vm.sh's own lines on stderr, and its exit
#                 status is vm.sh's; 124 if it ran past
#                 $CLANQ_EXEC_TIMEOUT seconds (default 300) and was
#                 killed, 125 if the harness failed (a bad argument, a
#                 build, the VM, the module, a kernel splat). A PROG
#                 linked to Open MPI brings mpirun and its runtime
#                 (tests/vm/mpi-pack.sh).
#                 CLANQ_VM_KERNEL=debug: the debug kernel, the module
#                 unloaded and kmemleak asked afterwards, as the test job
#   vm.sh fuzz    debug kernel: only the fuzzer (tests/fuzz), for
#                 $CLANQ_FUZZ_SECONDS (default 600), then unload + kmemleak
#   vm.sh coverage  the test job with a gcov-profiled module (CLANQ_GCOV=y,
#                 built in build/mod/debug-gcov/); the .gcda files come
#                 back through the console into that build directory
#                 (scripts/coverage.sh reads them)
#
# The fuzzer's corpus survives between runs in $CLANQ_CACHE/fuzz-corpus
# (default ~/.cache/clanq): packed into the initramfs, and rewritten from
# the "CLANQ-CORPUS" lines of a run that printed them all.
#
# CLANQ_ONLY=<regex> runs only the tests.list entries it matches;
# CLANQ_LIST=<file> reads that list instead of tests/vm/tests.list (make
# soak: tests/vm/soak.list).
#
# The console log is kept in build/vm/<job>/console.log (pair jobs:
# a.console.log, b.console.log), and its path is printed. A VM that does
# not finish within $CLANQ_VM_TIMEOUT seconds is killed and counts as a
# failure; of a pair, the one left is killed $CLANQ_PAIR_GRACE seconds
# (default 120) after the other has finished.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
job=${1:?usage: vm.sh test|run|bench|pkg|pair|pair-run|shell|fuzz|coverage|exec}
shift
vmdir=$root/build/vm/$job
results=${CLANQ_RESULTS:-$root/build/results.txt}
mkdir -p "$vmdir" "$(dirname "$results")"

t_start=$(date +%s)
step() { printf '>> %-44s [%3d s]\n' "$*" $(( $(date +%s) - t_start )); }
die() { echo "vm.sh: $*" >&2; exit 1; }

# exec: stdout is the guest command's alone (our own lines go to stderr),
# and every way this script fails, set -e's included, exits 125, so a
# status the guest's command could not have given
if [ $job = exec ]; then
	exec 3>&1 1>&2
	trap 'rc=$?; [ -n "${exec_done:-}" ] || exit 125' EXIT
	usage="usage: vm.sh exec [PROG...] [-- COMMAND...]"
	exec_progs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		[ -f "$1" ] || die "exec: no such program: $1 ($usage)"
		[ -x "$1" ] || die "exec: $1 is not executable ($usage)"
		exec_progs+=("$1")
		shift
	done
	[ "${1:-}" = -- ] && shift
	exec_cmd="$*"
	# nothing to run: the first program, by its name
	[ -n "${exec_cmd//[[:space:]]/}" ] || exec_cmd=${exec_progs[0]:+./${exec_progs[0]##*/}}
	[ -n "$exec_cmd" ] || die "exec: no program and no command ($usage)"
	exec_timeout=${CLANQ_EXEC_TIMEOUT:-300}
	[[ $exec_timeout =~ ^[1-9][0-9]*$ ]] || die "CLANQ_EXEC_TIMEOUT=$exec_timeout: not a number of seconds"
	case ${CLANQ_VM_KERNEL:-stock} in
	stock|debug)	;;
	*)		die "CLANQ_VM_KERNEL=$CLANQ_VM_KERNEL: stock or debug" ;;
	esac
elif [ $# -gt 0 ]; then
	die "$job: no arguments expected (only exec takes some): $*"
fi

case $job in
test|shell)	flavor=debug; timeout=${CLANQ_VM_TIMEOUT:-3600} ;;
coverage)	flavor=debug; timeout=${CLANQ_VM_TIMEOUT:-3000} ;;
fuzz)		flavor=debug; fuzz_seconds=${CLANQ_FUZZ_SECONDS:-600}
		[[ $fuzz_seconds =~ ^[0-9]+$ ]] || die "CLANQ_FUZZ_SECONDS: not a number"
		timeout=${CLANQ_VM_TIMEOUT:-$((fuzz_seconds + 600))} ;;
run)		flavor=stock; timeout=${CLANQ_VM_TIMEOUT:-1200}
		mem=${CLANQ_VM_MEM:-2G} ;;	# 10,000 connections, both ends
bench)		flavor=stock; timeout=${CLANQ_VM_TIMEOUT:-2400}
		mem=${CLANQ_VM_MEM:-2G} ;;	# idle: 10,000 connections, both ends
pkg)		flavor=stock; timeout=${CLANQ_VM_TIMEOUT:-900} ;;
pair)		flavor=debug; timeout=${CLANQ_VM_TIMEOUT:-900} ;;
pair-run)	flavor=stock; timeout=${CLANQ_VM_TIMEOUT:-600} ;;
# the command's own limit is kept in the guest; the VM's covers boot,
# module load and unload, kmemleak's scans (debug) besides
exec)		flavor=${CLANQ_VM_KERNEL:-stock}
		timeout=${CLANQ_VM_TIMEOUT:-$((exec_timeout + 300))}
		mem=${CLANQ_VM_MEM:-2G} ;;	# as run: room for many connections
*)		die "unknown job '$job'" ;;
esac
provider=${CLANQ_PAIR_PROVIDER:-rxe}
case $provider in
rxe|siw)	;;
*)		die "CLANQ_PAIR_PROVIDER=$provider: rxe or siw" ;;
esac
[ $job = pair-run ] && [ $provider = siw ] &&
	die "pair-run: Debian's stock kernel has no siw (CONFIG_RDMA_SIW is off): use the pair job"

# ---- kernel, module, programs ----
buildlog=$vmdir/build.log
make_() {
	make --no-print-directory "$@" >>"$buildlog" 2>&1 ||
		{ tail -n 30 "$buildlog" >&2; die "make $* failed (log: $buildlog)"; }
}
: > "$buildlog"
# the module's build directory: a gcov-profiled build has one of its own
modname=$flavor
if [ $job = coverage ]; then
	modname=debug-gcov
	kdir=$(tests/vm/kernel.sh debug)
	image=$kdir/arch/x86/boot/bzImage
	step "building gcov-profiled module + KUnit module"
	make_ module-debug CLANQ_MODNAME=$modname CLANQ_GCOV=y
elif [ $flavor = debug ]; then
	kdir=$(tests/vm/kernel.sh debug)
	image=$kdir/arch/x86/boot/bzImage
	step "building module + KUnit module (debug 6.12)"
	make_ module-debug
elif [ $job = pkg ]; then
	# nothing of ours is built here: the module and programs are the packages'
	image=$(tests/vm/kernel.sh stock-image)
	release=$(basename "$image" | sed 's/vmlinuz-//')
	pkg_ko=$(ls /lib/modules/$release/updates/dkms/clanq.ko* 2>/dev/null | head -n 1)
	[ -n "$pkg_ko" ] || die "no clanq.ko from DKMS for $release (tests/pkg/run.sh installs clanq-dkms)"
	ls build/deb/libclanq2_*.deb build/deb/clanq-tools_*.deb \
		build/deb/libfabric-clanq_*.deb >/dev/null 2>&1 ||
		die "no packages in build/deb (make deb)"
else
	image=$(tests/vm/kernel.sh stock-image)
	step "building module (stock $(basename "$image" | sed 's/vmlinuz-//'))"
	make_ module-stock
fi
if [ $job = exec ]; then
	# what a user's command may call beside its own programs; not the
	# integration tests
	step "building examples and tools"
	make_ lib examples benches tools
elif [ $job != pkg ]; then
	step "building test programs"
	make_ vm-bins
fi
mkdir -p build/vm
[ build/vm/vm-exit -nt tests/vm/vm-exit.c ] ||
	gcc -static -O2 -Wall -Werror -o build/vm/vm-exit tests/vm/vm-exit.c

# ---- initramfs ----
step "packing initramfs"
rootfs=$vmdir/rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs"/{bin,clanq/bin,etc}
cp /bin/busybox "$rootfs/bin/busybox"
cp tests/vm/init "$rootfs/init"
cp build/vm/vm-exit "$rootfs/clanq/bin/"
if [ $job = pkg ]; then
	# the packages' files, where they would be on a host: the module as
	# DKMS installed it (uncompressed: busybox's insmod reads plain ELF),
	# the .debs for dpkg, and the shared libraries their programs need
	# (found in a scratch unpacking; libclanq itself comes from dpkg);
	# Debian's fi_info and fi_pingpong where libfabric-bin puts them, to
	# drive the provider libfabric-clanq installs
	kmod=$rootfs/lib/modules/$release/updates/dkms
	mkdir -p "$kmod" "$rootfs/clanq/deb"
	case $pkg_ko in
	*.xz)	xz -dc "$pkg_ko" > "$kmod/clanq.ko" ;;
	*.zst)	zstd -qdc "$pkg_ko" > "$kmod/clanq.ko" ;;
	*.gz)	gzip -dc "$pkg_ko" > "$kmod/clanq.ko" ;;
	*)	cp "$pkg_ko" "$kmod/clanq.ko" ;;
	esac
	cp build/deb/libclanq2_*.deb build/deb/clanq-tools_*.deb build/deb/libfabric-clanq_*.deb \
		"$rootfs/clanq/deb/"
	mkdir -p "$rootfs/usr/bin"
	for p in fi_info fi_pingpong; do
		cp -L "$(command -v $p)" "$rootfs/usr/bin/" ||
			die "no $p (libfabric-bin: scripts/deps.sh)"
	done
	# busybox's modinfo wants a modules.dep: pkg.sh gets the host's answer
	modinfo -F parm "$pkg_ko" > "$rootfs/clanq/modinfo-parm"
	unpacked=$vmdir/unpacked
	rm -rf "$unpacked" && mkdir -p "$unpacked"
	for deb in "$rootfs"/clanq/deb/*.deb; do dpkg-deb -x "$deb" "$unpacked"; done
	cp tests/vm/pkg.sh tests/vm/checks.sh "$rootfs/clanq/"
	libdirs=$(find "$unpacked" -name 'libclanq.so*' -printf '%h\n' | sort -u | tr '\n' :)
	for elf in "$unpacked"/usr/bin/* "$unpacked"/usr/lib/*/libfabric/*.so \
		"$rootfs"/usr/bin/fi_*; do
		LD_LIBRARY_PATH=$libdirs ldd "$elf" 2>/dev/null | grep -oE '/[^ ]+' || true
	done | grep -v libclanq | sort -u | while read -r lib; do
		mkdir -p "$rootfs$(dirname "$lib")"
		cp -L "$lib" "$rootfs$lib"
	done
else
	cp build/mod/$modname/driver/clanq.ko "$rootfs/clanq/"
	# the verbs wire, where the kernel has the RDMA CM
	cp build/mod/$modname/driver/clanq_verbs.ko "$rootfs/clanq/" 2>/dev/null || true
fi
if [ $flavor = debug ] && [ $job != pair ] && [ $job != exec ]; then
	cp build/mod/$modname/kunit/clanq_kunit.ko "$rootfs/clanq/"
fi
if [ $job = exec ]; then
	cp build/examples/* build/bench/* build/tools/* "$rootfs/clanq/bin/" 2>/dev/null || true
elif [ $job != pkg ]; then
	cp build/vm/bin/* build/examples/* build/bench/* build/tools/* "$rootfs/clanq/bin/" 2>/dev/null || true
	# the libfabric provider and Debian's tools to drive it (fabric.sh;
	# libfabric and what it links come with the libraries below), off
	# the PATH: clanq-bench's smoke run takes an fi_pingpong it finds
	# for its libfabric baseline, whose shm provider fails here
	mkdir -p "$rootfs/clanq/fabric"
	cp build/provider/libclanq-fi.so "$rootfs/clanq/fabric/"
	for p in fi_info fi_pingpong; do
		command -v $p >/dev/null && cp -L "$(command -v $p)" "$rootfs/clanq/fabric/"
	done
fi
# exec: the user's programs, their command and its time limit
if [ $job = exec ]; then
	mkdir -p "$rootfs/clanq/exec" "$rootfs/clanq/lib"
	for p in "${exec_progs[@]}"; do
		cp -L "$p" "$rootfs/clanq/exec/"
	done
	printf '%s\n' "$exec_cmd" > "$rootfs/clanq/exec.sh"
	echo "$exec_timeout" > "$rootfs/clanq/exec-timeout"
fi
# CLANQ_ONLY=<regex>: only the tests.list entries whose name matches it
# (while working on them; the KUnit suites always run)
grep -v '^#' "${CLANQ_LIST:-tests/vm/tests.list}" | awk -v re="${CLANQ_ONLY:-.}" '{ n = $1; sub(/@.*/, "", n) } n ~ re' \
	> "$rootfs/clanq/tests"
cp tests/vm/demo.sh tests/vm/checks.sh tests/vm/examples.sh tests/vm/bench-smoke.sh \
	tests/vm/fabric.sh "$rootfs/clanq/"
cp tests/vm/bench.sh "$rootfs/clanq/bench.sh"
printf '%s\n' "${CLANQ_BENCH_ARGS:-}" > "$rootfs/clanq/bench-args"
# the baselines' tools (UCX, libfabric, perftest over Soft-RoCE): make bench
if [ $job = bench ]; then
	tests/vm/peers-pack.sh "$rootfs" "$image" >>"$buildlog" 2>&1 ||
		die "packing the baselines' tools failed (log: $buildlog)"
fi
echo "nr_nics=2" > "$rootfs/clanq/modargs"
# pair: one NIC per VM (init adds node_base: 10 on a, 20 on b); the rdma
# tool (its libraries come with the others below); the stock kernel's
# virtio-net and Soft-RoCE modules (the debug kernel has them built in)
if [ $job = pair ] || [ $job = pair-run ]; then
	echo "nr_nics=1" > "$rootfs/clanq/modargs"
	cp tests/vm/pair.sh "$rootfs/clanq/"
	[ $job = pair ] && pair_count=${CLANQ_PAIR_COUNT:-1000} || pair_count=${CLANQ_PAIR_COUNT:-10000}
	echo "$pair_count" > "$rootfs/clanq/pair-count"
	# the test job of the pair runs the verbs wire's suite after the demo
	# (CLANQ_PAIR_SUITE=1: the stock kernel's too, for its timings)
	{ [ $job = pair ] || [ -n "${CLANQ_PAIR_SUITE:-}" ]; } &&
		touch "$rootfs/clanq/pair-suite"
	# the suite's remote fetch-and-adds per endpoint (CLANQ_PAIR_FADDS,
	# with CLANQ_PAIR_SUITE=1 pair-run: docs/decisions.md)
	rm -f "$rootfs/clanq/pair-fadds"
	if [ -n "${CLANQ_PAIR_FADDS:-}" ]; then
		[[ $CLANQ_PAIR_FADDS =~ ^[1-9][0-9]*$ ]] ||
			die "CLANQ_PAIR_FADDS=$CLANQ_PAIR_FADDS: not a number of fetch-and-adds"
		echo "$CLANQ_PAIR_FADDS" > "$rootfs/clanq/pair-fadds"
	fi
	rdma=$(command -v rdma) || die "no rdma tool (iproute2): make deps"
	cp -L "$rdma" "$rootfs/clanq/bin/rdma"
	if [ $flavor = stock ]; then
		release=$(basename "$image" | sed 's/vmlinuz-//')
		tests/vm/mods-pack.sh "$rootfs/clanq/mods" "/lib/modules/$release" \
			virtio_net crc32_generic rdma_rxe rdma_cm ib_uverbs >>"$buildlog" 2>&1 ||
			die "packing the stock kernel's modules failed (log: $buildlog)"
		# raw verbs beside clanq's ping-pong and RDMA writes, reads and
		# atomics on the same devices: perftest's ib_send_lat,
		# ib_write_lat/_bw, ib_read_lat/_bw and ib_atomic_lat/_bw (one
		# package: scripts/deps.sh), libibverbs and its
		# rxe provider (ldd below finds the libraries they link)
		if command -v ib_send_lat >/dev/null; then
			for p in ib_send_lat ib_write_lat ib_write_bw ib_read_lat ib_read_bw \
				 ib_atomic_lat ib_atomic_bw; do
				cp -L "$(command -v $p)" "$rootfs/clanq/bin/" ||
					die "perftest without $p? (scripts/deps.sh installs perftest)"
			done
			vlib=/usr/lib/x86_64-linux-gnu/libibverbs
			mkdir -p "$rootfs$vlib" "$rootfs/etc/libibverbs.d"
			cp -L "$vlib"/librxe-rdmav*.so "$rootfs$vlib/"
			cp /etc/libibverbs.d/rxe.driver "$rootfs/etc/libibverbs.d/"
		fi
	fi
fi
corpus=${CLANQ_CACHE:-$HOME/.cache/clanq}/fuzz-corpus
corpus_max=${CLANQ_CORPUS_MAX:-3000}	# entries kept (about 2.5 KiB each at most)
[ -f "$corpus" ] && cp "$corpus" "$rootfs/clanq/corpus"

# Shared libraries (libc, libcmocka, libfabric) of the dynamically linked
# programs and of the provider.
for elf in "$rootfs"/clanq/bin/* "$rootfs"/clanq/fabric/*; do
	ldd "$elf" 2>/dev/null | grep -oE '/[^ ]+' || true
done | sort -u | while read -r lib; do
	mkdir -p "$rootfs$(dirname "$lib")"
	cp -L "$lib" "$rootfs$lib"
done
# exec: a user's program may link libclanq.so.2, the tree's (build/lib,
# searched first: it matches the module) or an installed one, or other
# libraries of its own. Those in the loader's default directories go
# where they are; the rest into /clanq/lib, the guest's LD_LIBRARY_PATH.
# One that ldd cannot find here would not load there either: say so now.
if [ $job = exec ]; then
	for elf in "$rootfs"/clanq/exec/*; do
		out=$(LD_LIBRARY_PATH=$root/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$elf" 2>/dev/null) || continue
		missing=$(grep 'not found' <<<"$out" || true)
		[ -z "$missing" ] || die "exec: ${elf##*/} needs libraries not found on this host:" $missing
		grep -oE '/[^ ]+' <<<"$out" || true
	done | sort -u | while read -r lib; do
		case ${lib%/*} in
		/lib|/lib64|/usr/lib|/lib/x86_64-linux-gnu|/usr/lib/x86_64-linux-gnu)
			mkdir -p "$rootfs${lib%/*}"
			cp -L "$lib" "$rootfs$lib" ;;
		*)	cp -L "$lib" "$rootfs/clanq/lib/" ;;
		esac
	done
fi
# exec: a program linked to Open MPI brings its runtime (mpirun, orted,
# plugins), as Debian's openmpi-bin installs it
if [ $job = exec ]; then
	for elf in "$rootfs"/clanq/exec/*; do
		if ldd "$elf" 2>/dev/null | grep -q 'libmpi\.so'; then
			tests/vm/mpi-pack.sh "$rootfs" >>"$buildlog" 2>&1 ||
				die "exec: packing Open MPI for ${elf##*/} failed (log: $buildlog)"
			break
		fi
	done
fi
(cd "$rootfs" && find . | cpio -o -H newc --quiet) > "$vmdir/initramfs.cpio"

# ---- boot ----
append="console=ttyS0 panic=-1 clanq.mode=$job"
# coverage is the test job, with the .gcda files sent back at the end
[ $job = coverage ] && append="console=ttyS0 panic=-1 clanq.mode=test clanq.gcov=1"
[ $job = fuzz ] && append="$append clanq.fuzz_seconds=$fuzz_seconds"
# tsc=reliable: the clocksource watchdog could switch the guest to the
# hpet mid-run, after which every clock read costs ~0.8 us under TCG
{ [ $job = run ] || [ $job = bench ]; } && append="$append quiet tsc=reliable"
[ $job = pkg ] && append="$append quiet"
# exec: the stock kernel as for run, but with warnings on the console
# (quiet hides a WARNING, which must fail an exec as it fails a test)
[ $job = exec ] && [ $flavor = stock ] && append="$append loglevel=5 tsc=reliable"
# pair jobs: init's pair mode; the role (clanq.role=a|b) is added per VM
if [ $job = pair ] || [ $job = pair-run ]; then
	append="console=ttyS0 panic=-1 clanq.mode=pair clanq.flavor=$flavor clanq.provider=$provider"
	[ $flavor = stock ] && append="$append tsc=reliable"
fi
# The CPU model: max (every feature TCG has) for the tests; for make
# bench qemu64, because with max glibc's memcpy picks rep movsb for
# 16 KiB..256 KiB, which TCG runs 4-5x slower (64 KiB: 0.48 vs 2.1 GB/s): the
# bandwidth figures and their memcpy baseline run under the one model,
# which clanq-bench prints in its header. CLANQ_VM_CPU overrides.
# Without la57: with 5-level paging, 6.12's pgtable_l5_enabled() reads the
# boot CPU's LA57 feature bit, which identify_cpu() zeroes for a moment
# while it re-reads CPUID; a timer interrupt in that window made KASAN
# compute its shadow's start for 4-level paging and report a
# "wild-memory-access in rcu_is_watching" on the per-CPU data (about one
# debug boot in five under load, twice in a row in one CI run). clanq has
# no use for 5-level paging.
cpu=${CLANQ_VM_CPU:-max,la57=off}
[ $job = bench ] && cpu=${CLANQ_VM_CPU:-qemu64}
qemu=(qemu-system-x86_64 -M q35 -cpu "$cpu" -accel tcg,thread=multi -smp 2 -m ${mem:-${CLANQ_VM_MEM:-512M}}
	-nic none -no-reboot -display none
	-kernel "$image" -initrd "$vmdir/initramfs.cpio" -append "$append"
	-device isa-debug-exit,iobase=0xf4,iosize=0x04 -pidfile "$vmdir/qemu.pid")
log=$vmdir/console.log

if [ $job = shell ]; then
	exec "${qemu[@]}" -serial mon:stdio -monitor none
fi

# The live view's awk: mawk (Debian's awk) reads a pipe in blocks unless
# told not to, which held the view minutes behind the VM.
awk_live=(awk)
awk -W version 2>/dev/null | grep -q mawk && awk_live=(awk -W interactive)

# The live view, of one console on stdin: frames and splats for a test
# run, the demo for a run (pair-run: pair.sh's output), each line after
# $1 (pair jobs: "a| ", "b| ").
live_view() {
	"${awk_live[@]}" -v job="$job" -v tag="${1:-}" '
		BEGIN { frame = job ~ /^(run|bench)$/ ? "demo" : job == "pair-run" ? "pair" : "" }
		{ sub(/\r$/, ""); l = $0; sub(/^\[ *[0-9]+\.[0-9]+\] /, "", l) }
		frame != "" && l == "CLANQ-BEGIN " frame { show = 1; next }
		frame != "" && l ~ "^CLANQ-END " frame " " { show = 0 }
		l ~ /^CLANQ-FILE-BEGIN / { file = 1; next }
		l ~ /^CLANQ-FILE-END / { file = 0; next }
		file { next }
		# its own lines; kernel messages only if they are splats
		# (awk, not tr, strips the CRs: tr would hold lines in its buffer)
		show && l == $0 { print "   " tag l; fflush(); next }
		# the pair test: the steps of pair.sh, and why one failed
		job == "pair" && l ~ /^\[ +(OK|FAILED|SKIPPED) +\] / { print "   " tag "  " l; fflush(); why = l ~ /FAILED/; next }
		why && l ~ /^   / { print "   " tag "  " l; fflush() }
		{ why = 0 }
		l ~ /^CLANQ-END / { n = l; sub(/^CLANQ-END /, "", n); rc = n; sub(/.* rc=/, "", rc); at = rc; sub(/ .*/, "", rc); rc += 0
			sub(/^[0-9-]+ *\(at /, "", at); sub(/ s\)$/, "", at); sub(/ rc=.*/, "", n)
			printf "   %s%-36s %-18s %8s s\n", tag, n, rc == 0 ? "ok" : "FAILED (rc " rc ")", at; fflush() }
		l ~ /(BUG:|WARNING:|Oops|Call Trace|Kernel panic|UBSAN:|KASAN:|unreferenced object)/ { print "   " tag "!! " l; fflush() }
		l ~ /^fuzz: / { print "     " tag l; fflush() }'
}

# exec's view: the command's lines (between its markers; not the
# kernel's, which carry a timestamp) to fd 3, our stdout, as they come
# (awk's own stdout: a reopened /dev/fd/3 would truncate a file it is);
# splats to stderr. The guest ends the command's output with a newline of
# its own (its last line may have none): an empty line just before the
# end marker is that one, and dropped.
exec_view() {
	"${awk_live[@]}" '
		{ sub(/\r$/, ""); l = $0; sub(/^\[ *[0-9]+\.[0-9]+\] /, "", l) }
		l == "CLANQ-EXEC-BEGIN" { show = 1; next }
		l ~ /^CLANQ-EXEC-END / { show = 0; held = 0; next }
		show && l == $0 {
			if (held) { print ""; held = 0 }
			if ($0 == "") held = 1; else print
			fflush(); next }
		l ~ /(BUG:|WARNING:|Oops|Call Trace|Kernel panic|UBSAN:|KASAN:|unreferenced object)/ {
			print "!! " l > "/dev/stderr"; fflush("/dev/stderr") }' >&3
}

# One boot; sets rc and status.
boot() {
	local view=live_view
	[ $job = exec ] && view=exec_view
	step "booting $flavor kernel (2 vCPUs, TCG)"
	rm -f "$vmdir/qemu.pid"
	splat_watch_start "$log" "$vmdir/qemu.pid"
	set +e
	# The live view: frames and splats for a test run, the demo for a run.
	timeout -k 10 "$timeout" "${qemu[@]}" -serial stdio -monitor none </dev/null 2>&1 |
		tee "$log" | $view
	rc=${PIPESTATUS[0]}
	splat_watch_stop
	set -e
	case $rc in
	124|137)	status="killed after ${timeout} s" ;;
	*)		if [ $((rc % 2)) = 1 ]; then status="guest status $((rc >> 1))"
			else status="qemu status $rc (guest did not report: panic?)"; fi ;;
	esac
	step "VM finished: $status"
}

# Did the kernel splat before clanq.ko was loaded? Then the report cannot
# be about clanq: under TCG the debug kernel was seen (about one boot in
# five, with other VMs running, before la57 was turned off: see cpu= below)
# to report a KASAN wild-memory-access in early start_kernel. Such a boot
# is kept as console.boot-splat.log and repeated once; a second one fails
# the run like any other splat.
# (awk reads to the end: exiting early would kill tr with SIGPIPE on a long
# log, and with pipefail the function would then say "no splat")
splat_before_insmod() {
	tr -d '\r' < "${1:-$log}" | awk '
		/CLANQ-BEGIN insmod/ { loaded = 1 }
		!loaded && /(BUG:|WARNING:|Oops|Call Trace|Kernel panic|UBSAN:|KASAN:)/ { splat = 1 }
		END { exit !splat }'
}

# splat_watch LOG PIDFILE, in the background while a debug VM boots: the
# moment LOG shows a splat before clanq.ko is loaded, stop the VM (its
# qemu's pid in PIDFILE), so the boot is repeated at once, not after a
# test run that took 47 minutes on a slow host and would have taken as
# long again. Ends when the module's load begins or the VM is gone.
splat_watch() {
	local log=$1 pidfile=$2 pid i
	for ((i = 0; i < 900; i++)); do
		sleep 2
		pid=$(cat "$pidfile" 2>/dev/null) || continue
		kill -0 "$pid" 2>/dev/null || return 0
		grep -q "CLANQ-BEGIN insmod" "$log" 2>/dev/null && return 0
		if splat_before_insmod "$log"; then
			echo "vm.sh: $log: a splat before clanq.ko was loaded; stopping this boot" >&2
			kill "$pid" 2>/dev/null
			return 0
		fi
	done
}

# splat_watch_start LOG PIDFILE: splat_watch in the background for a
# debug VM (a stock one's early reports are not retried), its pid in
# watch_pid; splat_watch_stop when the VM is done
splat_watch_start() {
	watch_pid=
	[ $flavor = debug ] || return 0
	splat_watch "$@" &
	watch_pid=$!
}
splat_watch_stop() {
	[ -z "$watch_pid" ] || { kill $watch_pid; wait $watch_pid; } 2>/dev/null || true
}

# ---- pair, pair-run: two VMs wired to each other only ----
# Each has one vCPU (two VMs on two host cores) and a virtio NIC whose
# frames travel as UDP datagrams between two sockets on 127.0.0.1: a's
# port is even, b's the next one, picked free from a base drawn from our
# PID. Nothing else reaches them (-nic none). Both boot at once under the
# same timeout; once one has finished, the other has $CLANQ_PAIR_GRACE
# seconds to finish too before it is killed (its own steps are bounded,
# so that only catches a hang).
port_taken() { ss -Hlun 2>/dev/null | awk '{ print $4 }' | grep -qE "[:.]$1\$"; }
pick_ports() {
	local base=$((20000 + ($$ % 2000) * 10)) i
	for ((i = 0; i < 100; i += 2)); do
		port_a=$((base + i)) port_b=$((base + i + 1))
		port_taken $port_a || port_taken $port_b || return 0
	done
	die "no two free UDP ports on 127.0.0.1 from $base"
}

# run_vm ROLE MYPORT OTHERPORT MAC: one of the pair, its console in
# $vmdir/ROLE.console.log, its qemu status in $vmdir/ROLE.rc
run_vm() {
	local r=$1 me=$2 other=$3 mac=$4 q
	q=(qemu-system-x86_64 -M q35 -cpu "$cpu" -accel tcg -smp 1 -m "${CLANQ_VM_MEM:-512M}"
		-nic none -no-reboot -display none
		-netdev "socket,id=n0,udp=127.0.0.1:$other,localaddr=127.0.0.1:$me"
		-device "virtio-net-pci,netdev=n0,mac=$mac"
		-kernel "$image" -initrd "$vmdir/initramfs.cpio" -append "$append clanq.role=$r"
		-device isa-debug-exit,iobase=0xf4,iosize=0x04 -pidfile "$vmdir/$r.pid")
	splat_watch_start "$vmdir/$r.console.log" "$vmdir/$r.pid"
	set +e
	timeout -k 10 "$timeout" "${q[@]}" -serial stdio -monitor none </dev/null 2>&1 |
		tee "$vmdir/$r.console.log" | live_view "$r| "
	echo "${PIPESTATUS[0]}" > "$vmdir/$r.rc"
	splat_watch_stop
}

# Both VMs; sets rc_a, rc_b, status_a, status_b.
boot_pair() {
	local grace=${CLANQ_PAIR_GRACE:-120} first=0 r pid rc status
	pick_ports
	step "booting two $flavor VMs, a and b (1 vCPU each, TCG)"
	echo "   wire: UDP 127.0.0.1:$port_a (a) <-> 127.0.0.1:$port_b (b), RDMA provider $provider"
	rm -f "$vmdir"/[ab].rc "$vmdir"/[ab].pid "$vmdir"/[ab].killed
	t_boot=$(date +%s)
	# (their shells' own complaints, "Killed" and such, to a file)
	run_vm a $port_a $port_b 52:54:00:c1:a0:01 2>"$vmdir/a.shell.log" &
	local pid_a=$!
	run_vm b $port_b $port_a 52:54:00:c1:a0:02 2>"$vmdir/b.shell.log" &
	local pid_b=$!
	while [ ! -f "$vmdir/a.rc" ] || [ ! -f "$vmdir/b.rc" ]; do
		if [ $first = 0 ] && { [ -f "$vmdir/a.rc" ] || [ -f "$vmdir/b.rc" ]; }; then
			first=$(date +%s)
			[ -f "$vmdir/a.rc" ] && r=a || r=b
			step "VM $r finished first; the other has $grace s"
		fi
		if [ $first != 0 ] && [ $(($(date +%s) - first)) -ge "$grace" ]; then
			for r in a b; do
				[ -f "$vmdir/$r.rc" ] && continue
				pid=$(cat "$vmdir/$r.pid" 2>/dev/null || true)
				[ -n "$pid" ] || continue
				# SIGTERM first, SIGKILL 5 s later if it is still there
				if [ -f "$vmdir/$r.killed" ]; then
					kill -KILL "$pid" 2>/dev/null || true
				else
					echo "$(($(date +%s) - first))" > "$vmdir/$r.killed"
					kill "$pid" 2>/dev/null || true
				fi
			done
			sleep 5
		fi
		sleep 1
	done
	wait $pid_a $pid_b || true
	for r in a b; do
		rc=$(cat "$vmdir/$r.rc")
		if [ -f "$vmdir/$r.killed" ]; then
			status="killed $(cat "$vmdir/$r.killed") s after the other VM had finished"
		else case $rc in
		124)		status="killed after ${timeout} s" ;;
		137)		if [ $(($(date +%s) - t_boot)) -ge "$timeout" ]; then
					status="killed after ${timeout} s"
				else status="qemu killed (SIGKILL) from outside"; fi ;;
		129|130|143)	status="qemu ended by signal $((rc - 128)) from outside" ;;
		*)		if [ $((rc % 2)) = 1 ]; then status="guest status $((rc >> 1))"
				else status="qemu status $rc (guest did not report: panic?)"; fi ;;
		esac; fi
		eval "rc_$r=\$rc status_$r=\$status"
		step "VM $r finished: $status"
	done
}

if [ $job = pair ] || [ $job = pair-run ]; then
	boot_pair
	# a splat before clanq.ko was loaded, on either: both boot once more
	if [ $flavor = debug ] && { splat_before_insmod "$vmdir/a.console.log" ||
		splat_before_insmod "$vmdir/b.console.log"; }; then
		for r in a b; do
			cp "$vmdir/$r.console.log" "$vmdir/$r.console.boot-splat.log"
		done
		echo "vm.sh: a kernel reported a problem while booting, before clanq was" \
			"loaded (logs kept: $vmdir/[ab].console.boot-splat.log); booting both once more" >&2
		boot_pair
	fi
	: > "$vmdir/results.txt"
	for r in a b; do
		tr -d '\r' < "$vmdir/$r.console.log" | awk -f tests/results.awk -v vm=1 \
			-v prefix="vm-pair-$r/" -v want_kunit=0 > "$vmdir/$r.results.txt"
		eval "rc=\$rc_$r status=\$status_$r"
		if [ -f "$vmdir/$r.killed" ] || [ $((rc % 2)) = 0 ] || [ "$rc" -gt 1 ]; then
			grep -q '^FAIL' "$vmdir/$r.results.txt" ||
				echo "FAIL vm-pair-$r/exit: $status" >> "$vmdir/$r.results.txt"
		fi
		cat "$vmdir/$r.results.txt" >> "$vmdir/results.txt"
	done
	cat "$vmdir/results.txt" >> "$results"
	read -r p f < <(awk '/^PASS/{p++} /^FAIL/{f++} END{print p+0, f+0}' "$vmdir/results.txt")
	grep '^FAIL' "$vmdir/results.txt" | sed 's/^/   /' || true
	echo "vm $job: $p passed, $f failed (console logs: $vmdir/a.console.log, b.console.log)"
	[ "$f" = 0 ]
	exit
fi

boot
if [ $job != run ] && [ $job != bench ] && [ $job != pkg ] && splat_before_insmod; then
	cp "$log" "$vmdir/console.boot-splat.log"
	echo "vm.sh: the kernel reported a problem while booting, before clanq was" \
		"loaded (log kept: $vmdir/console.boot-splat.log); booting once more" >&2
	boot
fi

# exec: the command's status from its end marker (the VM's own status
# carries only whether the harness's steps passed); the harness's
# results (module load and unload, splats, kmemleak) kept beside the
# console log, not in $CLANQ_RESULTS: an exec is not a test run
if [ $job = exec ]; then
	tr -d '\r' < "$log" | awk -f tests/results.awk -v vm=1 -v prefix="vm-exec/" \
		-v want_kunit=0 > "$vmdir/results.txt"
	end=$(tr -d '\r' < "$log" | sed -n 's/^\(\[ *[0-9.]*\] \)\{0,1\}CLANQ-EXEC-END rc=\([0-9]*\).*/\2/p' | tail -n 1)
	timed_out=$(tr -d '\r' < "$log" | grep -c '^CLANQ-EXEC-TIMEOUT' || true)
	if [ -z "$end" ]; then
		step "the command did not finish: $status (console log: $log)"
		exit 125
	fi
	if grep -q '^FAIL' "$vmdir/results.txt"; then
		grep '^FAIL' "$vmdir/results.txt" | sed 's/^/   /'
		step "the command exited $end, but the harness failed (console log: $log)"
		exit 125
	fi
	exec_done=1
	if [ "$timed_out" != 0 ]; then
		step "the command was killed after $exec_timeout s (CLANQ_EXEC_TIMEOUT)"
		exit 124
	fi
	step "the command exited $end (console log: $log)"
	exit "$end"
fi

# bench: clanq-bench's CSV and JSON, sent over the console, into
# build/bench/, and the plots drawn from them
if [ $job = bench ]; then
	mkdir -p build/bench
	tr -d '\r' < "$log" | awk -v dir=build/bench '
		/^CLANQ-FILE-BEGIN / { f = dir "/" $2; printf "" > f; next }
		/^CLANQ-FILE-END / { close(f); f = ""; next }
		f != "" { print >> f }'
	if [ -s build/bench/clanq-bench.csv ]; then
		step "results: build/bench/clanq-bench.csv, .json"
		scripts/bench-report.sh build/bench/clanq-bench.csv build/bench ||
			plot_failed=1
	fi
fi

tr -d '\r' < "$log" | awk -f tests/results.awk -v vm=1 -v prefix="vm/" \
	-v want_kunit=$([ $job = test ] || [ $job = coverage ] && echo 1 || echo 0) > "$vmdir/results.txt"
[ -z "${plot_failed:-}" ] || echo "FAIL vm/bench-plot: the summary or the plots failed" >> "$vmdir/results.txt"
if [ $((rc % 2)) = 0 ] || [ $rc -gt 1 ]; then
	grep -q '^FAIL' "$vmdir/results.txt" ||
		echo "FAIL vm/exit: $status" >> "$vmdir/results.txt"
fi
cat "$vmdir/results.txt" >> "$results"

# The fuzzer's corpus: only from a run that printed all of it (up to
# its CLANQ-CORPUS-END line), with a version line first; capped.
if grep -q '^CLANQ-CORPUS-END ' <(tr -d '\r' < "$log"); then
	mkdir -p "$(dirname "$corpus")"
	{
		echo "clanq-fuzz-corpus 1"
		tr -d '\r' < "$log" | sed -n 's/^\(\[ *[0-9.]*\] \)\{0,1\}CLANQ-CORPUS \([0-9a-f]*\)$/\2/p' |
			awk '!seen[$0]++' | tail -n "$corpus_max"
	} > "$corpus.tmp" && mv "$corpus.tmp" "$corpus"
	step "fuzz corpus: $(($(wc -l < "$corpus") - 1)) programs in $corpus"
fi

# coverage: the .gcda files, a base64 tar between two marker lines,
# unpacked into the module's build directory (where the .gcno files are)
if [ $job = coverage ]; then
	gcdir=$root/build/mod/$modname/driver
	find "$gcdir" -name '*.gcda' -delete
	if tr -d '\r' < "$log" | sed -n '/^CLANQ-GCOV-BEGIN/,/^CLANQ-GCOV-END/p' |
		grep -v '^CLANQ-GCOV-' | base64 -d > "$vmdir/gcda.tar.gz" &&
		tar -xzf "$vmdir/gcda.tar.gz" -C "$gcdir"; then
		step "coverage data: $(find "$gcdir" -name '*.gcda' | wc -l) .gcda files in $gcdir"
	else
		echo "FAIL vm/gcov: no coverage data in the console log" | tee -a "$vmdir/results.txt" >> "$results"
	fi
fi
read -r p f < <(awk '/^PASS/{p++} /^FAIL/{f++} END{print p+0, f+0}' "$vmdir/results.txt")
grep '^FAIL' "$vmdir/results.txt" | sed 's/^/   /' || true
echo "vm $job: $p passed, $f failed (console log: $log)"
[ "$f" = 0 ]
