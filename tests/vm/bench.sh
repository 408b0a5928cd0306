# make bench, inside the stock-kernel VM: clanq-bench's whole suite (or
# the arguments in /clanq/bench-args, from CLANQ_BENCH_ARGS), then its
# CSV and JSON sent back over the console between marker lines, which
# tests/vm/vm.sh writes to build/bench/.
args=$(cat /clanq/bench-args 2>/dev/null)
[ -n "$args" ] || args=all
[ -x /clanq/peers-setup.sh ] && sh /clanq/peers-setup.sh
ulimit -n 65536 2>/dev/null
CLANQ_BENCH_PROGRESS=1 clanq-bench -o /tmp/clanq-bench $args
rc=$?
for f in /tmp/clanq-bench.csv /tmp/clanq-bench.json; do
	[ -f $f ] || continue
	echo "CLANQ-FILE-BEGIN ${f##*/}"
	cat $f
	echo "CLANQ-FILE-END ${f##*/}"
done
exit $rc
