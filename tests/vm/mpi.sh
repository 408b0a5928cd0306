# Open MPI on clanq (make test's mpi stage, tests/vm/mpi-test.sh; run by
# vm.sh exec in the stock-kernel VM, with mpi_check, libclanq-fi.so and
# Debian's fi_info and fi_pingpong beside this script, Open MPI packed by
# mpi-pack.sh): fi_pingpong -e rdm -c through ofi_rxm, then mpi_check (provider/tests/mpi_check.c) on 2 and 4 ranks over
# --mca pml cm --mca mtl ofi with the provider forced, "clanq;ofi_rxm",
# ranks spread over both soft NICs (FI_CLANQ_NIC by rank: two nodes, as
# two hosts); the NICs' counters must show the job went through clanq.
t=/tmp/mpi
mkdir -p $t
. ./checks.sh
export FI_PROVIDER_PATH=$PWD
# root, in a VM of our own
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

nics=$(ls -d /sys/class/misc/clanq[0-9]* | wc -l)
expect "fi_info: FI_EP_RDM is ofi_rxm over clanq" 0 "provider: clanq;ofi_rxm" \
	fi_info -p "clanq;ofi_rxm" -t FI_EP_RDM
FI_CLANQ_NIC=clanq1 fi_info -p clanq > $t/out 2>&1
if grep -q "domain: clanq1" $t/out && ! grep -q "domain: clanq0" $t/out; then
	ok "FI_CLANQ_NIC=clanq1 offers clanq1 alone"
else
	bad "FI_CLANQ_NIC=clanq1 offers clanq1 alone" "$(head -c 400 $t/out)"
fi
# (fi_info's status is getinfo's error: 61, FI_ENODATA)
expect "FI_CLANQ_NIC naming no NIC offers nothing, and says why" 61 "FI_CLANQ_NIC=clanq9: no such NIC" \
	env FI_CLANQ_NIC=clanq9 FI_LOG_LEVEL=warn fi_info -p clanq

# fi_pingpong -e rdm -c through ofi_rxm over the provider, one size per
# protocol of ofi_rxm: eager, segmented, and (above 128 KiB) rendezvous,
# which reads with the provider's RMA; server on NIC 0, client on NIC 1
port=47600
for s in 8 65536 1048576; do
	case $s in 1048576) n=20 ;; 65536) n=100 ;; *) n=500 ;; esac
	port=$((port + 1))
	pingpong "clanq;ofi_rxm" rdm $s $n $port
done

# the sum of a counter over the NICs
counter() { cat /sys/class/misc/clanq*/statistics/$1 | awk '{ s += $1 } END { print s + 0 }'; }

for n in 2 4; do
	what="mpirun -n $n mpi_check over clanq;ofi_rxm"
	oob0=$(counter oob_sent) rdma0=$(counter rdma_bytes)
	start=$(cut -d' ' -f1 /proc/uptime)
	# each rank on NIC rank % nics; stdin closed (mpirun forwards it)
	timeout 600 mpirun --oversubscribe -n $n --mca plm isolated \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "clanq;ofi_rxm" \
		--mca btl self \
		sh -c "FI_CLANQ_NIC=\$((OMPI_COMM_WORLD_RANK % $nics)) exec ./mpi_check -n 100 -s 300" \
		< /dev/null > $t/mpi 2>&1
	rc=$?
	end=$(cut -d' ' -f1 /proc/uptime)
	oob=$(( $(counter oob_sent) - oob0 )) rdma=$(( $(counter rdma_bytes) - rdma0 ))
	cat $t/mpi
	echo "   $n ranks: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s;" \
		"the NICs sent $oob OOB messages and moved $rdma bytes by RDMA"
	if [ $rc != 0 ] || ! grep -q "^mpi_check: all checks passed" $t/mpi; then
		bad "$what" "exited $rc: $(grep -v '^mpi_check: \(pingpong\|allreduce\)' $t/mpi | head -c 600)"
	# connections are set up by OOB messages; ofi_rxm moves each 1 MiB
	# message of the ping-pong (11 each way) by an RDMA read
	elif [ $oob -lt $n ] || [ $rdma -lt $((22 << 20)) ]; then
		bad "$what" "the job did not go through clanq: $oob OOB messages, $rdma RDMA bytes"
	else
		ok "$what"
	fi
done
[ $failed = 0 ]
