#!/bin/bash
# Build (once) and locate the kernels the VM harness boots.
#
#   kernel.sh src           print the extracted linux-source-6.12 tree (extracts once)
#   kernel.sh debug-dir     print the debug kernel's build dir (no build)
#   kernel.sh debug         build the debug kernel if its cache entry is missing,
#                           then print its build dir
#   kernel.sh stock-image   print the stock kernel image (Debian package)
#   kernel.sh stock-kdir    print the stock kernel's headers (for modules)
#   kernel.sh verify DIR    check DIR/.config against the fragment
#
# The debug kernel is tinyconfig + tests/vm/debug.config, built with O= into
# $CLANQ_CACHE (default ~/.cache/clanq), keyed by a hash of the source
# package version, the fragment, this script and the compiler. A finished
# build leaves a stamp; with the stamp present nothing is run at all (a no-op
# make in a kernel tree still walks it for half a minute).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
frag=$here/debug.config
cache=${CLANQ_CACHE:-$HOME/.cache/clanq}
srcpkg=linux-source-6.12

die() { echo "kernel.sh: $*" >&2; exit 1; }

src_version() {
	dpkg-query -W -f='${Version}' "$srcpkg" 2>/dev/null ||
		die "$srcpkg is not installed (run 'make deps')"
}

src_dir() {
	local ver dir tarball
	ver=$(src_version)
	dir=$cache/src-$ver
	tarball=/usr/src/$srcpkg.tar.xz
	if [ ! -e "$dir/.extracted" ]; then
		[ -f "$tarball" ] || die "$tarball missing (run 'make deps')"
		echo ">> extracting $srcpkg $ver (once, ~1 min)" >&2
		rm -rf "$dir"
		mkdir -p "$dir"
		tar -C "$dir" -xJf "$tarball"
		touch "$dir/.extracted"
	fi
	echo "$dir/$srcpkg"
}

debug_key() {
	{
		src_version
		cat "$frag" "$0"
		gcc --version | head -n 1
	} | sha256sum | cut -c1-16
}

debug_dir() { echo "$cache/debug-$(debug_key)"; }

# Every line of the fragment must survive olddefconfig unchanged.
verify_config() {
	local cfg=$1/.config bad=0 line opt
	[ -f "$cfg" ] || die "no .config in $1"
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qxF -- "$line" "$cfg" && continue
			opt=${line%%=*}
			echo "kernel.sh: fragment wants '$line', .config has:" \
				"'$(grep -E "^(# )?$opt[= ]" "$cfg" || echo "$opt absent")'" >&2
			bad=1 ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }; opt=${opt%% *}
			if grep -q "^$opt=" "$cfg"; then
				echo "kernel.sh: fragment wants $opt off, .config has" \
					"'$(grep "^$opt=" "$cfg")'" >&2
				bad=1
			fi ;;
		esac
	done < "$frag"
	[ $bad = 0 ] || die "the final .config dropped or changed fragment options (a dependency is off)"
}

build_debug() {
	local src obj log jobs t0
	src=$(src_dir)
	obj=$(debug_dir)
	if [ -e "$obj/.clanq-built" ]; then
		echo "$obj"
		return
	fi
	mkdir -p "$cache"
	exec 9>"$cache/.build.lock"
	flock 9
	if [ -e "$obj/.clanq-built" ]; then echo "$obj"; return; fi
	rm -rf "$obj"
	mkdir -p "$obj"
	log=$obj/build.log
	jobs=$(nproc)
	t0=$(date +%s)
	echo ">> building the debug kernel (once; ~9-12 min on 2 cores), log: $log" >&2
	{
		make -C "$src" O="$obj" tinyconfig
		"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "$frag"
		make -C "$src" O="$obj" olddefconfig
	} >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "configuring failed"; }
	verify_config "$obj"
	echo ">>   config verified: $(grep -c '=y' "$obj/.config") options on" >&2
	# 'modules' writes Module.symvers, which out-of-tree modules need.
	if ! make -C "$src" O="$obj" -j"$jobs" bzImage modules >>"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "kernel build failed"
	fi
	[ -f "$obj/Module.symvers" ] || die "no Module.symvers after 'make modules'"
	touch "$obj/.clanq-built"
	echo ">>   debug kernel built in $(( $(date +%s) - t0 )) s" >&2
	echo "$obj"
}

stock_release() {
	local r
	r=$(ls /boot/vmlinuz-6.12.*-amd64 2>/dev/null | sed 's|/boot/vmlinuz-||' |
		grep -Ev -- '-(rt|cloud)-amd64$' | sort -V | tail -n 1)
	[ -n "$r" ] || die "no stock 6.12 kernel in /boot (run 'make deps')"
	echo "$r"
}

case "${1:-}" in
src)		src_dir ;;
debug-dir)	debug_dir ;;
debug)		build_debug ;;
stock-image)	echo "/boot/vmlinuz-$(stock_release)" ;;
stock-kdir)
	d=/usr/src/linux-headers-$(stock_release)
	[ -d "$d" ] || die "$d missing (run 'make deps')"
	echo "$d" ;;
verify)		verify_config "${2:?directory}" ;;
*)		die "usage: kernel.sh src|debug-dir|debug|stock-image|stock-kdir|verify DIR" ;;
esac
