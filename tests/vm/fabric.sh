# The libfabric provider in the debug VM (tests.list: fabric,
# fabric-pingpong): libfabric finds libclanq-fi.so through
# FI_PROVIDER_PATH (vm.sh packs it in /clanq/fabric, with Debian's
# fi_info and fi_pingpong and the libraries they load).
#   fabric.sh unit       provider/tests/test_fabric.c
#   fabric.sh pingpong   fi_info -p clanq (and ofi_rxm's FI_EP_RDM over
#                        it); fi_pingpong -e msg -c between NIC 0 and
#                        NIC 1, 8 B .. 1 MiB
set -u
export FI_PROVIDER_PATH=/clanq/fabric
export PATH=/clanq/fabric:$PATH		# fi_info, fi_pingpong (vm.sh)
case "${1:-}" in
unit)	exec test_fabric ;;
pingpong) ;;
*)	echo "usage: fabric.sh unit|pingpong" >&2; exit 2 ;;
esac
t=/tmp/fabric
mkdir -p $t
. /clanq/checks.sh

expect "fi_info -p clanq: clanq0" 0 "domain: clanq0" fi_info -p clanq
expect "fi_info -p clanq: clanq1" 0 "domain: clanq1" fi_info -p clanq
expect "fi_info -p clanq: provider clanq" 0 "provider: clanq$" fi_info -p clanq
expect "fi_info -p clanq -t FI_EP_MSG" 0 "type: FI_EP_MSG" fi_info -p clanq -t FI_EP_MSG
# libfabric's ofi_rxm layers FI_EP_RDM over FI_EP_MSG providers with RMA
expect "fi_info -t FI_EP_RDM: ofi_rxm over clanq" 0 "provider: clanq;ofi_rxm" \
	fi_info -p "clanq;ofi_rxm" -t FI_EP_RDM

# fi_pingpong -e msg on the provider: server on clanq0, client on
# clanq1 (another node), data checked (-c); the TCP control socket on
# loopback, a port per run. (-e rdm, through ofi_rxm, runs in the stock
# kernel, in make test's mpi stage, tests/vm/mpi.sh: libfabric takes
# ~12 s to start a process in this kernel, and an rdm round trip ~10 ms.)
port=47600
for s in 8 64 1024 4096 65536 1048576; do
	case $s in 1048576) n=50 ;; 65536) n=200 ;; *) n=1000 ;; esac
	port=$((port + 1))
	pingpong clanq msg $s $n $port
done
[ $failed = 0 ]
