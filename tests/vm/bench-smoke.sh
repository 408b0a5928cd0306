# clanq-bench's smoke run (tests.list: clanq-bench), in the test VM: its
# arguments checked, then the quick suite (-q all) with every row it must
# print, so the tool cannot rot. Each check prints a cmocka-style line
# (tests/results.awk counts them). The numbers are the debug kernel's:
# only what cannot depend on speed is asserted (rows present, answers
# checked by the tool itself, system calls of the polled paths).
set -u
t=/tmp/bench-smoke
mkdir -p $t
. /clanq/checks.sh

expect "--help" 0 "usage: clanq-bench" clanq-bench --help
expect "no command" 2 "which test?" clanq-bench
expect "an unknown command" 2 "unknown command 'fast'" clanq-bench fast
expect "two commands" 2 "one command" clanq-bench lat bw
expect "an unknown option" 2 "try 'clanq-bench --help'" clanq-bench --bogus lat
expect "--iters 5" 2 "iters: '5' is not a number in 10" clanq-bench -n 5 lat
expect "--iters garbage" 2 "is not a number" clanq-bench -n 1x lat
expect "--time 0" 2 "time: '0' is not a number of seconds" clanq-bench -t 0 bw
expect "--nics 1" 2 "is not two NIC numbers" clanq-bench --nics 1 lat
expect "--nics 1,999" 2 "is not two NIC numbers" clanq-bench --nics 1,999 lat
expect "a NIC that is not there" 1 "is clanq.ko loaded" clanq-bench --nics 1,9 --only clanq -q lat
expect "-o into a directory that is not there" 1 "/nonexistent/x.csv" clanq-bench -o /nonexistent/x -q lat

# the whole quick suite
if clanq-bench -q -o $t/s all > $t/table 2> $t/err; then
	ok "clanq-bench -q all"
else
	bad "clanq-bench -q all" "exited $?: $(tail -c 600 $t/err)"
fi
cat $t/table
# row NAME AWK-CONDITION: some CSV row satisfies it
row() {
	if awk -F, -v OFS=, "NR > 1 && ($2) { found = 1 } END { exit !found }" $t/s.csv; then
		ok "row: $1"
	else
		bad "row: $1" "no CSV row with $2"
	fi
}
for m in pio-poll pio-block rdma-poll rdma-block oob-poll oob-block; do
	row "lat clanq $m" "\$1 == \"lat\" && \$2 == \"clanq\" && \$3 == \"$m\" && \$9 > 0"
done
row "lat shm (the ratio's baseline)" '$1 == "lat" && $2 == "shm" && $9 > 0'
row "lat clanq pio-poll has its ratio" '$1 == "lat" && $3 == "pio-poll" && $18 > 0'
for i in udp tcp eventfd pipe; do
	row "lat $i" "\$1 == \"lat\" && \$2 == \"$i\" && \$9 > 0"
done
row "bw clanq pio" '$1 == "bw" && $2 == "clanq" && $3 == "pio" && $14 > 0'
row "bw clanq rdma" '$1 == "bw" && $2 == "clanq" && $3 == "rdma" && $14 > 0'
row "bw clanq rdma-write (the engine alone)" '$1 == "bw" && $2 == "clanq" && $3 == "rdma-write" && $14 > 0'
row "bw memcpy" '$1 == "bw" && $2 == "memcpy" && $14 > 0'
for m in rdma-1s-write rdma-1s-read rdma-1s-fadd; do
	row "lat clanq $m (one-sided)" "\$1 == \"lat\" && \$2 == \"clanq\" && \$3 == \"$m\" && \$9 > 0"
done
row "lat shm cas-pingpong (the CPU's atomics)" '$1 == "lat" && $2 == "shm" && $3 == "cas-pingpong" && $9 > 0'
row "bw clanq rdma-read (the engine alone)" '$1 == "bw" && $2 == "clanq" && $3 == "rdma-read" && $14 > 0'
row "bw clanq rdma-fadd (the engine alone)" '$1 == "bw" && $2 == "clanq" && $3 == "rdma-fadd" && $15 > 0'
# (not all: under the debug kernel a slow turn makes some ping-pong
# doorbells look like a stream, which goes to the thread; 65% seen)
row "lat clanq rdma: the doorbell ran turns inline" \
	'$1 == "lat" && $3 == "rdma-poll" && match($0, /[0-9]+% inline/) && substr($0, RSTART, RLENGTH) + 0 >= 25'
row "idle clanq spin, 100 connections" '$1 == "idle" && $2 == "clanq" && $3 == "spin" && $5 == 100'
row "idle clanq block, 100 connections" '$1 == "idle" && $2 == "clanq" && $3 == "block" && $5 == 100'
row "idle epoll and poll servers" '$1 == "idle" && $2 == "poll" && $5 == 100'
row "load clanq, 4 clients, server CPU measured" '$1 == "load" && $2 == "clanq" && $5 == 4 && $17 > 0'
row "load udp+epoll baseline" '$1 == "load" && $2 == "udp" && $17 > 0'
# the no-system-call claim, counted by the driver, both ends
row "polled messaging: 0 system calls per round trip" \
	'$1 == "lat" && $2 == "clanq" && $3 == "pio-poll" && $16 != "" && $16 + 0 < 0.01'
row "bw pio: under 0.05 system calls per message" \
	'$1 == "bw" && $2 == "clanq" && $3 == "pio" && $16 != "" && $16 + 0 < 0.05'
# the peers' tools are not in the debug VM: skipped, said, not failed
if grep -q "not measured" $t/table $t/err; then
	ok "missing baselines are skipped with a reason"
else
	bad "missing baselines are skipped with a reason" "no 'not measured' line"
fi
if tail -n 2 $t/s.json | tr -d '\n ' | grep -q '^]}$'; then
	ok "the JSON is closed"
else
	bad "the JSON is closed" "$(tail -n 2 $t/s.json)"
fi
exit $((failed > 0))
