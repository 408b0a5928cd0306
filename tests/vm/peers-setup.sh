#!/bin/sh
# peers-setup.sh: inside the stock VM (busybox sh, root), before
# clanq-bench: a Soft-RoCE device for perftest and UCX's rc transport.
#
# rxe needs an Ethernet-like netdev with an address; the VM has only lo
# (-nic none). rxe sends every packet through the netdev's UDP tunnel
# socket, except those addressed to its own GID, which it hands straight
# back to its receive path (its loopback). So both processes can use the
# same rxe device on a dummy link with an IPv4 address: nothing leaves
# the VM, and no second link or namespace is needed. A veth pair
# (one rxe per end) and lo itself are tried if dummy fails.
#
# Prints one line: what it set up, or why not. Always exits 0 (the
# benchmark then skips the Soft-RoCE rows with a note).

P=/clanq/peers
IP=$P/ip
[ -x $IP ] || IP=ip
say() { echo "peers-setup: $*"; exit 0; }

# UCX's posix transport and libfabric's shm provider shm_open() their
# segments: /dev/shm must exist (devtmpfs has none)
if ! grep -q ' /dev/shm ' /proc/mounts; then
	mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 shm /dev/shm
fi

[ -f $P/modules ] || say "no Soft-RoCE modules packed (not the stock kernel?)"
for m in $(cat $P/modules); do
	name=${m%.ko}
	grep -q "^$name " /proc/modules && continue
	insmod $P/$m 2>/tmp/insmod.err ||
		echo "peers-setup: insmod $m: $(cat /tmp/insmod.err)"
done
grep -q '^rdma_rxe ' /proc/modules || say "rdma_rxe did not load: no Soft-RoCE"
command -v rdma >/dev/null || say "no rdma tool (iproute2) packed: no Soft-RoCE"

# $1 netdev: a rxe device on it, and its port up?
try_rxe() {
	rdma link add rxe_$1 type rxe netdev $1 2>/tmp/rdma.err || return 1
	i=0
	while [ $i -lt 20 ]; do
		grep -q ACTIVE /sys/class/infiniband/rxe_$1/ports/1/state 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	echo "peers-setup: rxe_$1: port not ACTIVE: $(cat /sys/class/infiniband/rxe_$1/ports/1/state 2>/dev/null)"
	return 1
}

why=
if $IP link add cqd0 type dummy 2>/tmp/ip.err &&
   $IP addr add 10.77.0.1/24 dev cqd0 && $IP link set cqd0 up; then
	try_rxe cqd0 && say "rxe_cqd0 on dummy link cqd0 (10.77.0.1): both ends on one rxe device, rxe loops packets to its own address back"
	why="dummy: $(cat /tmp/rdma.err)"
else
	why="dummy link: $(cat /tmp/ip.err)"
fi
if $IP link add cqv0 type veth peer name cqv1 2>/tmp/ip.err &&
   $IP addr add 10.78.0.1/24 dev cqv0 && $IP addr add 10.78.0.2/24 dev cqv1 &&
   $IP link set cqv0 up && $IP link set cqv1 up; then
	try_rxe cqv0 && try_rxe cqv1 &&
		say "rxe_cqv0/rxe_cqv1 on veth pair cqv0/cqv1 (10.78.0.1/.2) ($why)"
	why="$why; veth: $(cat /tmp/rdma.err)"
else
	why="$why; veth link: $(cat /tmp/ip.err)"
fi
try_rxe lo && say "rxe_lo on lo ($why)"
say "no Soft-RoCE device: $why; lo: $(cat /tmp/rdma.err)"
