# make run: clanq doing its job, in the stock-kernel VM (2 soft NICs).
# An echo server on node 0, clients on node 0 and node 1, a stream
# between the nodes, a key-value service over clanq and over TCP+epoll,
# a raw shared-memory ping-pong as the yardstick, then a short report. Each step says what it starts; every program is
# one of the examples and runs unchanged on a real host.
set -u
out=/tmp/demo
mkdir -p $out
fail=0
step() { echo; echo "== $*"; }
die() { echo "demo: $*"; exit 1; }
msgs=${CLANQ_DEMO_MSGS:-20000}
bmsgs=${CLANQ_DEMO_BLOCK_MSGS:-2000}
idle=${CLANQ_DEMO_IDLE:-10000}
kvsecs=${CLANQ_DEMO_KV_SECONDS:-8}	# each of the four key-value runs

cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')
echo "== clanq on $(uname -r), $(nproc) vCPUs ($cpu), clocksource $cs"
echo "== driver: $(cat /sys/module/clanq/parameters/nr_nics) soft NICs, node ids from" \
	"$(cat /sys/module/clanq/parameters/node_base); loop wire"
clanq-info || die "clanq-info failed"

step "clanq-echo-server on node 0, service 7: one thread, one event queue"
clanq-echo-server -n 0 -s 7 -c $((idle + 64)) > $out/server 2>&1 &
server=$!

step "the yardstick: a raw shared-memory ping-pong between two processes"
shm_pingpong -m $msgs -S 8,1k | tee $out/shm || fail=1

# client NAME NIC ARGS...: one clanq-echo-client run, kept for the report
client() {
	name=$1; nic=$2; shift 2
	clanq-echo-client -n $nic -N 0 -s 7 "$@" | tee $out/$name ||
		{ echo "demo: clanq-echo-client $name failed"; fail=1; }
}
step "client on node 1 (the other NIC), polling: both sides spin, no system call"
client poll1 1 -m $msgs -S 8,1k -p
step "client on node 0 (the server's own NIC), polling"
client poll0 0 -m $msgs -S 8,1k -p
step "client on node 1, blocking: every answer wakes it through a tripwire"
client block1 1 -m $bmsgs -S 8,1k -B
step "16 connections from node 1 in turn, polling"
client many1 1 -c 16 -m $msgs -S 64 -p
step "client on node 1, polling, while the server holds $idle idle connections (opening them takes a while)"
client idle1 1 --idle $idle -m $msgs -S 8 -p

step "stopping the server (SIGINT): its counters"
kill -INT $server
wait $server || { echo "demo: the server failed"; fail=1; }
cat $out/server

step "clanq-stream: node 1 -> node 0, one-way, flow-controlled, checked message by message"
clanq-stream -l -n 0 -x 4 > $out/stream 2>&1 &
receiver=$!
for args in "-S 4k -b 64m" "-S 1m -b 256m" "-S 4k -b 64m --no-check" "-S 1m -b 256m --no-check"; do
	# shellcheck disable=SC2086
	clanq-stream -n 1 --to 0 $args || { echo "demo: clanq-stream $args failed"; fail=1; }
done
wait $receiver || { echo "demo: the stream receiver failed"; fail=1; }
cat $out/stream

# kv NAME SIZES [-T]: a clanq-kv server and one client run of $kvsecs s,
# the same load over clanq (node 1 -> node 0) or TCP+epoll (localhost)
kvload="-c 4 -w 8 -g 90 -k 256"
kv() {
	name=$1 sizes=$2; shift 2
	# -x: it leaves when the client's 4 connections are gone; -t: or at worst then
	clanq-kv server -n 0 -x 4 -t $((kvsecs + 120)) "$@" > $out/kvserver-$name 2>&1 &
	kvserver=$!
	# shellcheck disable=SC2086
	clanq-kv client -n 1 $kvload -S $sizes -t $kvsecs "$@" | tee $out/kv-$name ||
		{ echo "demo: clanq-kv client $name failed"; fail=1; }
	wait $kvserver || { echo "demo: clanq-kv server $name failed"; fail=1; }
	grep -h '^total:' $out/kvserver-$name
}
step "clanq-kv: a key-value service (one-thread server, 4 connections x 8 requests in flight, 90 % GET, every value checked), over clanq node 1 -> node 0, then over TCP+epoll on localhost"
kv clanq8 8
kv tcp8 8 -T
kv clanqmix 8,1k,64k
kv tcpmix 8,1k,64k -T

step "what the administrator sees: /sys/kernel/debug/clanq/clanq0/stats"
cat /sys/kernel/debug/clanq/clanq0/stats

# ---- the report ----
# row FILE SIZE COLUMN: a column of a clanq-echo-client / shm_pingpong row
row() { awk -v s="$2" -v c="$3" '$1 == s { print $c; exit }' "$1" 2>/dev/null; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }'; }
line() {	# NAME FILE
	printf "%-34s %9s %9s %9s %9s %9s %11s\n" "$1" "$(row $2 8 4)" "$(row $2 8 7)" \
		"$(row $2 1024 4)" "$(row $2 1024 7)" "$(ratio "$(row $2 8 4)" "$(row $out/shm 8 4)")" \
		"$(row $2 8 9)"
}
echo
echo "================================ report ================================"
echo "round trip in us (typical = median)  8 B typ  8 B 99.9%  1 KiB typ 1 KiB 99.9%  vs raw  syscalls/rt"
line "raw shared memory (spin)" $out/shm
line "clanq polled, node 1 -> 0" $out/poll1
line "clanq polled, node 0 -> 0" $out/poll0
line "clanq blocking, node 1 -> 0" $out/block1
printf "%-34s %9s %29s %9s %11s\n" "clanq polled, 16 connections, 64 B" \
	"$(row $out/many1 64 4)" "" "" "$(row $out/many1 64 9)"
printf "%-34s %9s %29s %9s %11s\n" "clanq polled, $idle idle beside" \
	"$(row $out/idle1 8 4)" "" "$(ratio "$(row $out/idle1 8 4)" "$(row $out/shm 8 4)")" \
	"$(row $out/idle1 8 9)"
echo
echo "stream node 1 -> node 0 (MiB/s, receiver's clock):"
awk '/^received:/ { n++; size = $5; bw = $12;
	kind = (n > 2) ? "no checksum" : "checksummed"
	printf "  %8s-byte messages, %-12s %10s MiB/s  (%s system calls/msg)\n", size, kind, bw, $16 }' $out/stream
echo
# kvrow LABEL FILE: ops/s, p50, p99, p99.9 of a clanq-kv client's row
kvcol() { awk -v c="$2" '$1 == "clanq" || $1 == "tcp" { print $c; exit }' "$1" 2>/dev/null; }
kvrow() { printf "  %-36s %10s %9s %9s %9s\n" "$1" "$(kvcol $2 6)" "$(kvcol $2 7)" \
	"$(kvcol $2 8)" "$(kvcol $2 9)"; }
kvratio() {	# LABEL CLANQ TCP: ops/s clanq/TCP, latencies TCP/clanq
	printf "  %-36s %9sx %8sx %8sx %8sx\n" "$1" "$(ratio "$(kvcol $2 6)" "$(kvcol $3 6)")" \
		"$(ratio "$(kvcol $3 7)" "$(kvcol $2 7)")" "$(ratio "$(kvcol $3 8)" "$(kvcol $2 8)")" \
		"$(ratio "$(kvcol $3 9)" "$(kvcol $2 9)")"
}
echo "key-value service, 4 connections x 8 in flight, 90 % GET, $kvsecs s each (clanq-kv):"
printf "  %-36s %10s %9s %9s %9s\n" "" "ops/s" "p50 us" "p99 us" "p99.9 us"
kvrow "clanq, node 1 -> 0, 8 B values" $out/kv-clanq8
kvrow "TCP+epoll, localhost, 8 B values" $out/kv-tcp8
kvratio "clanq vs TCP (latency: TCP/clanq)" $out/kv-clanq8 $out/kv-tcp8
kvrow "clanq, 8 B .. 64 KiB values" $out/kv-clanqmix
kvrow "TCP+epoll, 8 B .. 64 KiB values" $out/kv-tcpmix
kvratio "clanq vs TCP (latency: TCP/clanq)" $out/kv-clanqmix $out/kv-tcpmix
echo
grep -h '^#.*idle connections opened' $out/idle1 | sed 's/^# /idle: /'
grep -h '^per message:' $out/server | sed 's/^/server, /'
echo "========================================================================="
[ $fail = 0 ] || die "a step failed (see above)"
