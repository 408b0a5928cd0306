#!/bin/bash
# mods-pack.sh DIR MODDIR NAME...: kernel modules for a VM's initramfs.
#
# Each NAME (rdma_rxe, virtio_net, ...) and what it depends on, found in
# MODDIR/modules.dep (e.g. /lib/modules/<release> of the stock kernel),
# decompressed into DIR (busybox's insmod reads no .xz), and appended to
# DIR/modules in the order to insmod them (dependencies first, each
# once). The VM has no modprobe: whatever is loaded on demand (rxe's
# "crc32") must be named too. A NAME that is not there is said, and left
# out. Used by peers-pack.sh (make bench) and vm.sh (pair-run).
set -euo pipefail

dir=${1:?usage: mods-pack.sh DIR MODDIR NAME...}
mods=${2:?usage: mods-pack.sh DIR MODDIR NAME...}
shift 2
mkdir -p "$dir"
touch "$dir/modules"
if [ ! -f "$mods/modules.dep" ]; then
	echo "mods-pack: no $mods/modules.dep: no modules packed"
	exit 0
fi

want() {	# $1: module path relative to $mods; its deps, then itself
	local m=$1 d base
	base=${m##*/}
	base=${base%.xz}
	grep -qxF "$base" "$dir/modules" && return 0
	for d in $(awk -v m="$m:" '$1 == m { $1 = ""; print }' "$mods/modules.dep"); do
		want "$d"
	done
	case $m in
	*.xz)	xz -dc "$mods/$m" > "$dir/$base" ;;
	*)	cp "$mods/$m" "$dir/$base" ;;
	esac
	echo "$base" >> "$dir/modules"
}
for name in "$@"; do
	m=$(grep -oE "^[^:]*/$name\.ko(\.xz)?:" "$mods/modules.dep" | head -n 1 | tr -d :)
	if [ -n "$m" ]; then want "$m"; else echo "mods-pack: no $name module in $mods"; fi
done
