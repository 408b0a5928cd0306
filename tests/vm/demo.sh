# make run: what the VM shows, in order. Grows with the project.
echo "== clanq on $(uname -r), $(nproc) vCPUs"
echo "== driver: $(cat /sys/module/clanq/parameters/nr_nics) soft NICs," \
	"node ids from $(cat /sys/module/clanq/parameters/node_base)"
ls -l /dev/clanq*
echo
echo "== clanq-info: each NIC answers the ABI query"
clanq-info || exit 1
echo
echo "== the asynchronous queue between two threads, beside a cache-line ping-pong"
queue_bench -n 200000 || exit 1
echo
echo "== one server, one event queue, many endpoints; a client on another node"
evq_demo || exit 1
echo
echo "== what the administrator sees: /sys/kernel/debug/clanq/clanq0/stats"
cat /sys/kernel/debug/clanq/clanq0/stats
echo
echo "== OOB message rate and blocking wake-ups, beside UDP and eventfd (same kernel, same run)"
oob_bench || exit 1
echo; echo "== RDMA engine and PIO apertures: bandwidth beside memcpy, doorbells, crossover, starvation (same run)"; rdma_bench || exit 1
echo; echo "== tripwires: PIO write cost with 0/1/1000 armed beside memcpy; blocking ping-pong beside eventfd, pipe, evq (same run)"; tw_bench || exit 1
