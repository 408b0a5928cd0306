#!/bin/bash
# Open MPI's runtime into a VM's root (vm.sh exec, when a program it is
# given links libmpi): mpirun and orted, Open MPI's and PMIx's plugins
# (dlopen()ed, so ldd of the program does not name them), their
# help texts and configuration, where Debian installs them, and every
# shared library those load.
#   mpi-pack.sh ROOTFS
set -euo pipefail
rootfs=${1:?usage: mpi-pack.sh ROOTFS}
pkgs=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15)
for p in "${pkgs[@]}"; do
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] ||
		{ echo "mpi-pack: $p is not installed (scripts/deps.sh installs Open MPI)" >&2; exit 1; }
done
# each package's files but its documentation, symbolic links kept;
# mpirun itself resolved (Debian's is a link through /etc/alternatives)
dpkg -L "${pkgs[@]}" | grep -vE '^/usr/share/(doc|man|lintian)/' | sort -u | while read -r f; do
	[ -f "$f" ] || continue
	mkdir -p "$rootfs${f%/*}"
	cp -P "$f" "$rootfs$f"
done
for p in mpirun mpiexec; do
	cp -L "$(command -v $p)" "$rootfs/usr/bin/$p"
done
# the libraries of every ELF file packed (plugins included)
find "$rootfs/usr" -type f \( -name '*.so*' -o -perm -u+x \) | while read -r elf; do
	ldd "$elf" 2>/dev/null | grep -oE '/[^ ]+' || true
done | sort -u | while read -r lib; do
	[ -e "$rootfs$lib" ] && continue
	mkdir -p "$rootfs${lib%/*}"
	cp -L "$lib" "$rootfs$lib"
done
