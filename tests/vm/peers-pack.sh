#!/bin/bash
# peers-pack.sh ROOTFS IMAGE: put the baselines' tools into the stock VM's
# initramfs (called by tests/vm/vm.sh for the stock flavor).
#
#   ROOTFS/clanq/bin/     ucx_perftest, fi_pingpong, ib_write_lat/_bw, rdma
#   ROOTFS/clanq/peers/   iproute2's ip (busybox's cannot make every link
#                         type), the stock kernel's rdma_rxe and what it
#                         needs, decompressed, and the order to load them in
#   ROOTFS/clanq/peers-setup.sh   run inside the VM before clanq-bench
#
# plus the ldd closure of all of it, and the directories UCX and libibverbs
# dlopen their transports and providers from (ldd cannot see those).
# A tool that is not installed is left out: clanq-bench then skips its
# rows with a note. Takes a second or two.
set -euo pipefail

rootfs=${1:?usage: peers-pack.sh ROOTFS IMAGE}
image=${2:?usage: peers-pack.sh ROOTFS IMAGE}
here=$(cd "$(dirname "$0")" && pwd)
ver=${image##*/vmlinuz-}
mods=/lib/modules/$ver
lib=/usr/lib/x86_64-linux-gnu

mkdir -p "$rootfs/clanq/bin" "$rootfs/clanq/peers"
cp "$here/peers-setup.sh" "$rootfs/clanq/peers-setup.sh"
chmod +x "$rootfs/clanq/peers-setup.sh"

elfs=()
for t in ucx_perftest fi_pingpong ib_write_lat ib_write_bw rdma; do
	p=$(command -v "$t" || true)
	if [ -z "$p" ]; then
		echo "peers-pack: $t not installed (scripts/deps.sh): its rows will be skipped"
		continue
	fi
	cp -L "$p" "$rootfs/clanq/bin/$t"
	elfs+=("$p")
done
if [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || [ -x /bin/ip ]; then
	ip=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v ip)
	cp -L "$ip" "$rootfs/clanq/peers/ip"
	elfs+=("$ip")
fi

# dlopen'ed: UCX's transports (ib, cma, rdmacm), libibverbs' providers
# and the .driver files that name them. (Debian's libfabric has its
# providers built in: no libfabric/ directory to copy, if there is one
# it goes too.)
for d in "$lib/ucx" "$lib/libfabric" "$lib/libibverbs"; do
	[ -d "$d" ] || continue
	mkdir -p "$rootfs$d"
	cp -a "$d/." "$rootfs$d/"
	for so in "$d"/*.so*; do
		[ -f "$so" ] && [ ! -L "$so" ] && elfs+=("$so")
	done
done
if [ -d /etc/libibverbs.d ]; then
	mkdir -p "$rootfs/etc/libibverbs.d"
	cp -a /etc/libibverbs.d/. "$rootfs/etc/libibverbs.d/"
fi

# the shared libraries, with the paths ldd resolves them to
if [ ${#elfs[@]} -gt 0 ]; then
	for e in "${elfs[@]}"; do
		ldd "$e" 2>/dev/null | grep -oE '/[^ ]+' || true
	done | sort -u | while read -r so; do
		[ -e "$rootfs$so" ] && continue
		mkdir -p "$rootfs$(dirname "$so")"
		cp -L "$so" "$rootfs$so"
	done
fi
# ucx_perftest resolves its server's name with getaddrinfo: "localhost"
# must be in /etc/hosts (we pass 127.0.0.1 anyway)
[ -f "$rootfs/etc/hosts" ] || printf '127.0.0.1 localhost\n' > "$rootfs/etc/hosts"

# Soft-RoCE from the stock kernel: rdma_rxe and its dependencies, in the
# order modules.dep gives (dependencies first), decompressed here because
# busybox's insmod reads no .xz; veth and dummy for the link rxe sits on.
# crc32_generic first: rxe asks the crypto API for "crc32" (its ICRC)
# when a device is added, and without modprobe in the VM nothing loads it
# on demand (rxe_newlink then fails with ENOENT).
: > "$rootfs/clanq/peers/modules"
"$here/mods-pack.sh" "$rootfs/clanq/peers" "$mods" crc32_generic rdma_rxe veth dummy |
	sed 's/^mods-pack:/peers-pack:/'
echo "peers-pack: $(wc -l < "$rootfs/clanq/peers/modules") modules, ${#elfs[@]} programs and libraries for $ver"
