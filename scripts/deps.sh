#!/bin/bash
# Install every Debian package clanq needs, and nothing when nothing is
# missing (then it prints nothing). Safe to run any number of times.
#
# Kernels: the stock Debian 6.12 image + headers (for `make run`), the
# 6.12 source (for the debug kernel, checkpatch and sparse), and the 6.1
# headers (the module must also build for the previous LTS). The newest
# ABI the archive offers is taken, unless one is already installed.
#
# libfabric-dev: the provider's headers (provider/, rdma/providers/fi_prov.h).
# openmpi-bin and libopenmpi-dev: mpicc and mpirun for make test's MPI
# stage (Open MPI over the provider, tests/vm/mpi-test.sh).
#
# The baselines clanq-bench runs in the stock VM (tests/vm/peers-pack.sh):
# UCX's ucx_perftest, libfabric's fi_pingpong, perftest's ib_write_* over
# Soft-RoCE (librxe is in ibverbs-providers; the kernel side is the stock
# image's rdma_rxe), iproute2 for rdma(8) and ip(8). gnuplot for the plots.
#
# make deb and tests/pkg: debhelper with dh-dkms, dkms (builds the
# packaged module for each kernel whose headers are installed), lintian,
# and man-db to check the installed man pages. abi-dumper and
# abi-compliance-checker: make test's check of the library's ABI.
set -euo pipefail

PKGS=(
	build-essential make gcc bc bison flex libelf-dev libssl-dev dwarves
	cpio xz-utils kmod pkg-config
	qemu-system-x86 busybox-static
	libcmocka-dev sparse perl
	linux-source-6.12
	ucx-utils libfabric-bin libfabric-dev openmpi-bin libopenmpi-dev perftest ibverbs-providers iproute2
	gnuplot-nox abi-dumper abi-compliance-checker
	debhelper dh-dkms dkms lintian fakeroot dpkg-dev adduser groff-base man-db
)

installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

updated=
apt_update() {
	[ -n "$updated" ] && return
	echo ">> apt-get update" >&2
	sudo_ apt-get update -qq >/dev/null
	updated=1
}

# newest "linux-headers-<abi>-amd64" for a series, e.g. '6\.12\.[0-9]+\+deb12'
newest_abi() {
	apt-cache pkgnames "linux-headers-" |
		grep -E "^linux-headers-$1-amd64\$" | sort -V | tail -n 1 |
		sed -e 's/^linux-headers-//' -e 's/-amd64$//'
}

# The image package for an ABI: the signed one, or, while the archive's
# signed build lags behind a security upload (seen for 6.12.118: only
# linux-image-6.12.118+deb12-amd64-unsigned had a candidate), the unsigned
# one, which installs the same /boot/vmlinuz-<abi>-amd64.
image_pkg() {
	local p=linux-image-$1-amd64
	if apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		echo "$p"
	else
		echo "$p-unsigned"
	fi
}

have_kernel_pair() {	# $1: glob of an installed ABI, e.g. 6.12.*+deb12
	local v
	for v in /usr/src/linux-headers-$1-amd64; do
		[ -d "$v" ] || continue
		[ "$1" = "6.1.0-*" ] && return 0	# headers only for 6.1
		[ -f "/boot/vmlinuz-${v#/usr/src/linux-headers-}" ] && return 0
	done
	return 1
}

missing=()
for p in "${PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done

if ! have_kernel_pair '6.12.*+deb12'; then
	apt_update
	abi=$(newest_abi '6\.12\.[0-9]+\+deb12')
	[ -n "$abi" ] || { echo "deps: no Debian 6.12 kernel in the archive" >&2; exit 1; }
	missing+=("$(image_pkg "$abi")" "linux-headers-$abi-amd64")
fi
if ! have_kernel_pair '6.1.0-*'; then
	apt_update
	abi=$(newest_abi '6\.1\.0-[0-9]+')
	[ -n "$abi" ] || { echo "deps: no Debian 6.1 headers in the archive" >&2; exit 1; }
	missing+=("linux-headers-$abi-amd64")
fi

[ ${#missing[@]} = 0 ] && exit 0

apt_update
echo ">> installing ${#missing[@]} packages: ${missing[*]}" >&2
# INITRD=No: a kernel image only ever boots under qemu with our own
# initramfs; update-initramfs would take minutes for nothing.
sudo_ env INITRD=No DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo ">> packages installed" >&2
