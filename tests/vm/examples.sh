# The example programs, as a user runs them (tests.list: examples), in
# the test VM (2 soft NICs). Each check prints a cmocka-style line, so
# tests/results.awk counts them one by one.
set -u
t=/tmp/examples
mkdir -p $t
. /clanq/checks.sh

for p in clanq-echo-server clanq-echo-client clanq-stream shm_pingpong clanq-oob-pingpong \
	clanq-rdma-pingpong clanq-kv; do
	expect "$p --help" 0 "usage: $p" $p --help
	expect "$p: an unknown option" 2 "try '$p --help'" $p --bogus
done
expect "client: zero connections" 2 "conns: 0 is out of range" clanq-echo-client -c 0
expect "client: a size that is no number" 2 "sizes: 'x1' is not a number" clanq-echo-client -S 8,x1
expect "server: service 70000" 2 "service: 70000 is out of range" clanq-echo-server -s 70000
expect "stream: neither --listen nor --to" 2 "say --listen or --to NODE" clanq-stream
expect "stream: both" 2 "say --listen or --to NODE" clanq-stream -l -T 0
expect "client: a NIC that is not there" 1 "no such NIC" clanq-echo-client -n 9
expect "client: nobody listens" 1 "refused" clanq-echo-client -n 1 -N 0 -s 99
# longer than the ring: in pieces (lib/msg.c), checked by the receiver
expect "stream: 1 MiB messages through a 64 KiB ring" 0 "in pieces" sh -c \
	'clanq-stream -l -n 0 -s 31 >/dev/null 2>&1 & clanq-stream -n 1 -T 0 -s 31 -S 1m -b 8m --ring 64k; rc=$?; wait $! || rc=1; exit $rc'

# echo: a server that leaves after six connections; three clients in
# turn, polling, blocking and RDMA only, every answer checked by them
clanq-echo-server -n 0 -s 21 -x 6 > $t/server 2>&1 &
server=$!
expect "echo: polling from node 1, 8 B .. 3000 B" 0 "^3000 " \
	clanq-echo-client -n 1 -s 21 -m 300 -S 8,1k,3000 --ring 16k -p
expect "echo: blocking from node 0" 0 "^1024 " \
	clanq-echo-client -n 0 -s 21 -m 100 -S 8,1k -B
expect "echo: 4 connections, RDMA only" 0 "^2048 " \
	clanq-echo-client -n 1 -s 21 -c 4 -m 200 -S 8,2k --ring 16k --rdma-only
wait $server
rc=$?
if [ $rc != 0 ]; then
	bad "echo: the server" "exit status $rc: $(cat $t/server)"
elif ! grep -q "^total: 6 accepted, 0 open, 6 closed (0 reset), 1650 messages in, 1650 echoed" $t/server; then
	# (300 + 30) x 3 + (100 + 10) x 2 + (200 + 20) x 2: each size has a 10 % warm-up
	bad "echo: the server's counters" "$(cat $t/server)"
else
	ok "echo: the server's counters"
fi

# stream: two streams, PIO and RDMA, every checksum checked
clanq-stream -l -n 0 -s 22 -x 2 > $t/stream 2>&1 &
receiver=$!
expect "stream: 4 KiB messages by PIO" 0 "^sent: " \
	clanq-stream -n 1 -T 0 -s 22 -S 4k -b 8m
expect "stream: 64 KiB messages by RDMA" 0 "by RDMA" \
	clanq-stream -n 1 -T 0 -s 22 -S 64k -b 8m --rdma-only
wait $receiver
rc=$?
n=$(grep -c "every checksum right" $t/stream)
if [ $rc != 0 ] || [ "$n" != 2 ]; then
	bad "stream: the receiver" "exit status $rc, $n streams checked: $(cat $t/stream)"
else
	ok "stream: the receiver checked both"
fi

# OOB ping-pong (the verbs wire's first test, here on the loop wire): a
# server on node 1 that leaves at the client's bye, a client on node 0
expect "oob-pingpong: neither server nor client" 2 "say server or client" clanq-oob-pingpong
expect "oob-pingpong: a payload too big" 2 "size: 49 is out of range" clanq-oob-pingpong client -N 1 -S 49
expect "oob-pingpong: nobody at the endpoint" 1 "no answer from node 1 ep 99" \
	clanq-oob-pingpong client -i 0 -N 1 -e 99 -w 1
clanq-oob-pingpong server -i 1 -e 23 -t 120 > $t/oobpp 2>&1 &
oobpp=$!
expect "oob-pingpong: 500 round trips of 48 B, node 0 to node 1" 0 "^48  *500 " \
	clanq-oob-pingpong client -i 0 -N 1 -e 23 -n 500 -S 48
sed 's/^/   /' $t/out
wait $oobpp
rc=$?
# the hello may have been sent more than once: the count is not checked
if [ $rc != 0 ] || ! grep -q "^# bye from node 0 " $t/oobpp ||
	! grep -q ", 0 echoes failed" $t/oobpp; then
	bad "oob-pingpong: the server" "exit status $rc: $(cat $t/oobpp)"
else
	ok "oob-pingpong: the server echoed all and left at the bye"
fi

# RDMA write ping-pong and bandwidth (the verbs wire's benchmark, here on
# the loop wire): a server on node 1 that leaves at the client's bye
expect "rdma-pingpong: a size that is no multiple of 8" 2 "not a multiple of 8" \
	clanq-rdma-pingpong client -N 1 -L 12
clanq-rdma-pingpong server -i 1 -e 24 -t 120 > $t/rdmapp 2>&1 &
rdmapp=$!
expect "rdma-pingpong: round trips (block, poll), bandwidth (1, 4 endpoints), one-sided READs and fetch-and-adds, node 0 to 1" \
	0 "^faddbw  *8  *4 " clanq-rdma-pingpong client -i 0 -N 1 -e 24 -L 8,32 -n 200 -m both \
	-B 3000,64k -E 1,4 -b 1m -r 8,4096 -a -G 64k -A
sed 's/^/   /' $t/out
wait $rdmapp
rc=$?
if [ $rc != 0 ] || ! grep -q "^# bye from node 0 " $t/rdmapp; then
	bad "rdma-pingpong: the server" "exit status $rc: $(cat $t/rdmapp)"
else
	ok "rdma-pingpong: the server served every round trip and checksum, and left at the bye"
fi

# key-value service: bad arguments first
expect "kv: neither server nor client" 2 "say server or client" clanq-kv
expect "kv: a value of 4 bytes" 2 "sizes: 4 is out of range (8 .. 65536)" clanq-kv client -S 8,4
expect "kv: fewer keys than connections" 2 "4 keys for 8 connections" clanq-kv client -c 8 -k 4
expect "kv: the client's option to the server" 2 "conns is the client's" clanq-kv server -c 3
expect "kv: a TCP address that is none" 2 "not an IPv4 address" clanq-kv client -T -A 1.2.3
expect "kv: nobody listens" 1 "refused" clanq-kv client -n 1 -s 99 -m 10

# wait_for FILE PATTERN: up to 120 s for a background program to say it
wait_for() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 1200 ]; do
		sleep 0.1; i=$((i + 1))
	done
}

# kv over clanq: a server on node 0 that leaves after seven connections;
# clients that check every value (8 B .. 64 KiB, several in flight, so
# answers and requests wait for credit), and one killed by -9 mid-run:
# the server drops its two connections and goes on
clanq-kv server -n 0 -s 25 -x 7 -t 600 > $t/kvserver 2>&1 &
kvserver=$!
expect "kv: 4 connections x 4 in flight, 8 B .. 64 KiB, half PUTs" 0 "^clanq  *4  *4  *1000 " \
	clanq-kv client -n 1 -s 25 -c 4 -w 4 -S 8,1k,64k -g 50 -k 64 -m 1000
expect "kv: one at a time, from the server's own node" 0 "^clanq  *1  *1  *500 " \
	clanq-kv client -n 0 -s 25 -c 1 -m 500
clanq-kv client -n 1 -s 25 -c 2 -w 4 -S 8,64k -k 32 -t 600 > $t/kvkilled 2>&1 &
kvkilled=$!
wait_for $t/kvkilled "^# prefill:"
kill -9 $kvkilled
wait $kvkilled
wait $kvserver
rc=$?
if [ $rc != 0 ]; then
	bad "kv: the server" "exit status $rc: $(cat $t/kvserver)"
elif ! grep -q "^total: 7 accepted, 0 open, 7 closed (2 reset, 0 broke the protocol)" $t/kvserver; then
	bad "kv: the server dropped the killed client's connections and went on" "$(cat $t/kvserver)"
else
	ok "kv: the server dropped the killed client's connections and went on"
fi

# kill -9 of the server: its client says the connection was reset
clanq-kv server -n 0 -s 26 > $t/kvserver 2>&1 &
kvserver=$!
clanq-kv client -n 1 -s 26 -c 2 -w 2 -t 600 > $t/kvclient 2>&1 &
kvclient=$!
wait_for $t/kvclient "^# prefill:"
kill -9 $kvserver
wait $kvclient
rc=$?
if [ $rc != 1 ] || ! grep -q "reset" $t/kvclient; then
	bad "kv: the client of a server killed by -9" "exit status $rc: $(cat $t/kvclient)"
else
	ok "kv: the client of a server killed by -9 says the connection was reset"
fi
wait $kvserver

# kv over TCP+epoll, the same checks
clanq-kv server -T -P 7071 -x 2 -t 600 > $t/kvserver 2>&1 &
kvserver=$!
expect "kv: over TCP, 2 connections x 4 in flight, 8 B .. 64 KiB" 0 "^tcp  *2  *4  *500 " \
	clanq-kv client -T -P 7071 -c 2 -w 4 -S 8,64k -g 50 -k 32 -m 500
wait $kvserver
rc=$?
if [ $rc != 0 ] || ! grep -q "^total: 2 accepted, 0 open, 2 closed (0 reset" $t/kvserver; then
	bad "kv: the TCP server" "exit status $rc: $(cat $t/kvserver)"
else
	ok "kv: the TCP server"
fi

expect "shm_pingpong: a short run" 0 "^1024 " shm_pingpong -m 1000 -S 8,1k
[ $failed = 0 ]
