# make bench: the benchmarks' tables, each beside the baselines it is
# measured against in the same boot (absolute times under TCG mean
# little; ratios in one run mean a lot). clanq-bench (issue 13) will
# take this over.
echo "== clanq on $(uname -r), $(nproc) vCPUs"
echo
echo "== the asynchronous queue between two threads, beside a cache-line ping-pong"
queue_bench -n 200000 || exit 1
echo
echo "== OOB message rate and blocking wake-ups, beside UDP and eventfd (same kernel, same run)"
oob_bench || exit 1
echo
echo "== RDMA engine and PIO apertures: bandwidth beside memcpy, doorbells, crossover, starvation (same run)"
rdma_bench || exit 1
echo
echo "== tripwires: PIO write cost with 0/1/1000 armed beside memcpy; blocking ping-pong beside eventfd, pipe, evq (same run)"
tw_bench || exit 1
