# pair.sh ROLE RDMADEV NETDEV: one side of two VMs wired to each other
# (tests/vm/vm.sh pair and pair-run; tests/vm/init set up the link and
# the RDMA device). a is 10.77.0.1 (clanq nodes from 10), b 10.77.0.2
# (nodes from 20). Each step prints a cmocka-style line, so
# tests/results.awk counts them one by one, and the host sees both VMs'
# steps under their prefixes (vm-pair-a/, vm-pair-b/).
#
#   net           the other VM answers ping: the wire between them works
#   rdma-link     RDMADEV's port is ACTIVE / LINK_UP
#   clanq-setup   clanqctl binds clanq0 to RDMADEV and adds the other
#                 host's node as a peer
#   oob-pingpong  b serves clanq-oob-pingpong, a runs its client against
#                 node 20: OOB messages between the hosts, checked
#   conn-stream   clanq-stream: a connection from a to b (clanq_connect),
#                 messages checksummed, carried by RDMA WRITEs
#   fabric-pingpong  Debian's fi_pingpong -c from a to b on the libfabric
#                 provider (-e msg) and through ofi_rxm (-e rdm), 8 B and
#                 1 MiB (pair-run: more sizes and round trips, beside
#                 tcp;ofi_rxm on the same link)
#
# and in pair-run (no /clanq/pair-suite), clanq beside perftest on the
# same two rxe devices, b serving each program in turn:
#   ib-send-lat   perftest's 32-byte SEND round trip: the OOB one's match
#   rdma-write-lat  clanq-rdma-pingpong: 32-byte RDMA write round trips
#                 a -> b -> a, both ways of waiting (block, poll)
#   ib-write-lat  perftest's ib_write_lat, 32 bytes
#   rdma-write-bw   clanq-rdma-pingpong: a's RDMA writes of 64 KiB,
#                 256 KiB and 1 MiB into b's region, 1, 4 and 16
#                 endpoints at once
#   rdma-write-lat-wrote  the same round trips with clanq_verbs
#                 write_imm=0 on both sides (WRITE + WROTE, the path
#                 before WRITE_WITH_IMM), and the ratio of the two
#   ib-write-bw-64k, -256k, -1m  perftest's ib_write_bw, each size
#   rdma-read     clanq-rdma-pingpong's one-sided READ and fetch-and-add
#                 latency, READ bandwidth and fetch-and-add rate
#   ib-read-lat, ib-atomic-lat, ib-read-bw, ib-atomic-bw  perftest's
# and a prints clanq's numbers beside perftest's and their ratios (the
# issue's goals: round trip <= 1.2 x, bandwidth >= 0.9 x).
#
# and in the pair job (/clanq/pair-suite), test_verbs
# (tests/integration/test_verbs.c) in three rounds:
#   verbs-suite   b: the echo service; a: the suite against it (both
#                 directions, many endpoints, notices, events, counters)
#   verbs-reload  b unloads and reloads clanq_verbs under live
#                 connections; a's traffic makes a new connection
#   verbs-deaf    b stops taking messages (clanq_verbs test_deaf, a knob
#                 of the debug build): a's OOB messages fill the
#                 connection's send slots, an RDMA write to b waits for
#                 one and fails in bounded time, while RDMA among a's own
#                 processes keeps its latency (the engine never waits for
#                 a peer); then b hears again and traffic reconnects
#   verbs-hostile b attacks (clanq_verbs test_forge, a knob of the debug
#                 build, verbs_hostile.c): forged UNREACHABLEs naming a's
#                 endpoints and messages, OOB messages with forged nodes
#                 and types, malformed messages, region messages for what
#                 does not exist; meanwhile a's OOB and RDMA round trips
#                 with b and RDMA within a keep their data, RDMA under
#                 2 s each, echoes (b's service shares the attacker's
#                 vCPU) within 5 s (max and p99 beside idle ones), no
#                 forgery reaches an endpoint, true notices come once, the
#                 connection survives, a's clanq_verbs counters show the
#                 drops
#   verbs-hostile-unchecked  the same with a's check off (test_trust_notices,
#                 the rule before issue 28): it must fail, forged notices
#                 reaching a's endpoints
#   verbs-device-gone  a deletes its RDMA device under a live connection:
#                 errors, then with the device back a new connection
#   verbs-die     a tells b to die and keeps sending; b powers off on
#                 the spot (init's leave, no unload: nothing is said on
#                 the wire); a's sends turn into errors, never a hang
#
# Neither side waits for the other except through its own retries (a's
# ping, a's client's hello), each bounded: a VM that is gone makes the
# survivor's steps fail, never hang. CLANQ_PAIR_COUNT (/clanq/pair-count)
# round trips.
set -u
role=${1:?usage: pair.sh a|b RDMADEV NETDEV}
rdev=${2:?usage: pair.sh a|b RDMADEV NETDEV}
netdev=${3:?usage: pair.sh a|b RDMADEV NETDEV}
t=/tmp/pair
mkdir -p $t
. /clanq/checks.sh
count=$(cat /clanq/pair-count 2>/dev/null || echo 1000)
service=7007

case $role in
a) me=10.77.0.1 other=10.77.0.2 node=10 peer=20 ;;
b) me=10.77.0.2 other=10.77.0.1 node=20 peer=10 ;;
*) echo "pair.sh: role '$role': say a or b"; exit 2 ;;
esac
uptime_s() { read -r up _ < /proc/uptime; echo "${up%.*}"; }
echo "== $role: $me on $netdev, clanq0 is node $node, $rdev on $netdev; the other: $other, node $peer"

# net: the other VM may boot later: ping it until it answers (60 s)
net() {
	t0=$(uptime_s)
	while ! ping -c 1 -W 1 $other > $t/ping 2>&1; do
		[ $(($(uptime_s) - t0)) -lt 60 ] || { cat $t/ping; return 1; }
	done
	echo "the other VM answered after $(($(uptime_s) - t0)) s (uptime $(uptime_s) s)"
	ping -c 3 -W 2 $other
}
if net > $t/net 2>&1; then ok "net"; grep -E "answered|transmitted|round-trip" $t/net; net_ok=1
else bad "net" "$other does not answer ping: $(tail -n 3 $t/net)"; net_ok=0; fi

# rdma-link: the port follows the netdev; give it a few seconds
rdma_link() {
	i=0
	while [ $i -lt 20 ]; do
		rdma link show $rdev/1 > $t/link 2>&1
		grep -q "state ACTIVE physical_state LINK_UP" $t/link && { cat $t/link; return 0; }
		sleep 0.5
		i=$((i + 1))
	done
	cat $t/link
	rdma link show
	return 1
}
if rdma_link > $t/rdma 2>&1; then ok "rdma-link"; cat $t/rdma
else bad "rdma-link" "$rdev/1 is not ACTIVE / LINK_UP: $(cat $t/rdma)"; fi

# clanq-setup: the verbs wire, through clanqctl (tools/clanqctl.c)
setup() {
	command -v clanqctl > /dev/null ||
		{ echo "clanqctl is not installed (tools/clanqctl.c: not built yet?)"; return 1; }
	clanqctl bind $rdev port 1 || { echo "clanqctl bind $rdev port 1: exit status $?"; return 1; }
	clanqctl peer add $peer $other || { echo "clanqctl peer add $peer $other: exit status $?"; return 1; }
	clanqctl show 2>/dev/null || true
}
if setup > $t/setup 2>&1; then ok "clanq-setup"; cat $t/setup; setup_ok=1
else bad "clanq-setup" "$(cat $t/setup)"; setup_ok=0; fi

# oob-pingpong: b serves until a's bye (or 180 s), a retries its hello
# for 120 s (b may be later), then $count round trips, each echo within 5 s
if [ $setup_ok = 0 ] || [ $net_ok = 0 ]; then
	bad "oob-pingpong" "not run: $([ $net_ok = 0 ] && echo "no network" || echo "clanq-setup failed")"
elif [ $role = b ]; then
	echo "== b: clanq-oob-pingpong server on node $node, endpoint $service"
	if clanq-oob-pingpong server -e $service -t 180 > $t/server 2>&1; then
		ok "oob-pingpong"; cat $t/server
	else
		bad "oob-pingpong" "the server: exit status $?: $(cat $t/server)"
	fi
else
	echo "== a: clanq-oob-pingpong client on node $node -> node $peer endpoint $service," \
		"$count round trips of 32 bytes"
	# shown as it runs (make run's live view), kept for the verdict
	clanq-oob-pingpong client -N $peer -e $service -n $count -S 32 -T 5000 -w 120 \
		> $t/client 2>&1
	rc=$?
	cat $t/client
	if [ $rc = 0 ] && grep -q "^32  *$count " $t/client; then ok "oob-pingpong"
	else bad "oob-pingpong" "the client: exit status $rc"; fi
fi

# conn-stream: clanq_connect() between the hosts: b listens for one
# stream (180 s at most), a sends checksummed 64 KiB messages through a
# connection whose ring is b's region, written by RDMA WRITEs (no PIO
# across hosts) that fire b's tripwires; a's connect retries for 5 s
stream_bytes=$([ -f /clanq/pair-suite ] && echo 4m || echo 64m)
if [ $setup_ok = 0 ] || [ $net_ok = 0 ]; then
	bad "conn-stream" "not run: no network or clanq-setup failed"
elif [ $role = b ]; then
	if timeout 180 clanq-stream --listen > $t/stream 2>&1; then ok "conn-stream"
	else bad "conn-stream" "the receiver: exit status $?: $(tail -n 3 $t/stream)"; fi
	cat $t/stream
else
	sleep 2
	clanq-stream --to $peer --bytes $stream_bytes --size 64k > $t/stream 2>&1
	rc=$?
	cat $t/stream
	if [ $rc = 0 ]; then ok "conn-stream"
	else bad "conn-stream" "the sender: exit status $rc: $(tail -n 3 $t/stream)"; fi
fi

# fabric-pingpong: Debian's fi_pingpong on the libfabric provider
# between the hosts (clanq connections over the verbs wire), every
# message checked (-c): -e msg on the provider, -e rdm through ofi_rxm
# over it. b serves each run on a port of its own (the control socket is
# TCP over the link: b's -B, a's -P), bounded by timeout; a retries its
# client until b's server answers (libfabric takes ~12 s to start in
# the debug kernel). Few round trips in the pair job: there an 8-byte
# one costs ~130 ms and a 1 MiB message ~6 s (one vCPU each, a debug
# kernel, rxe's work beside a spinning poller). In pair-run, a then runs
# the same rdm round trip over tcp;ofi_rxm on the same link and prints
# the ratio. (Not verbs;ofi_rxm on the same rxe device: Debian's
# libfabric's verbs provider offers nothing here, fi_getinfo -61, even
# with FI_VERBS_IFACE naming the link.) pair-run also runs the msg round
# trip with FI_CLANQ_YIELD=0 (spin-msg): the poller that never
# yields, so the yield's worth is measured in every run; and with
# rdma_window=1 on both hosts (win1-msg): each engine one chunk at a
# time, a round trip each, as before the window, for its worth; and 1 MiB
# with the provider's rendezvous off (ring-msg: through the ring, two
# copies) beside the rendezvous (the receiver's engine READs it).
fab_runs="msg:8:50 msg:1048576:2 rdm:8:10 rdm:1048576:2"
[ -f /clanq/pair-suite ] ||
	fab_runs="msg:8:500 spin-msg:8:100 win1-msg:8:500 msg:65536:100 msg:1048576:20 ring-msg:1048576:20 rdm:8:500 rdm:65536:100 rdm:1048576:10 base-tcp:8:500"
fab_port=47900
fab_serve=$([ -f /clanq/pair-suite ] && echo 240 || echo 120)
if ! [ -x /clanq/fabric/fi_pingpong ] || [ $setup_ok = 0 ] || [ $net_ok = 0 ]; then
	bad "fabric-pingpong" "not run: $([ -x /clanq/fabric/fi_pingpong ] && echo "no network or clanq-setup failed" || echo "no fi_pingpong packed")"
else
	for run in $fab_runs; do
		ep=${run%%:*} s=${run#*:} n=${s#*:} s=${s%:*}
		fab_env= window=
		case $ep in
		msg)		prov=clanq ;;
		spin-msg)	prov=clanq ep=msg fab_env=FI_CLANQ_YIELD=0 ;;
		win1-msg)	prov=clanq ep=msg window=1 ;;
		ring-msg)	prov=clanq ep=msg fab_env=FI_CLANQ_RNDV_SIZE=0 ;;
		rdm)		prov="clanq;ofi_rxm" ;;
		base-tcp)	prov="tcp;ofi_rxm" ep=rdm ;;
		esac
		fab_port=$((fab_port + 1))
		name="fabric-pingpong $prov -e $ep ${s} B x $n"
		[ -n "$fab_env" ] && name="$name $fab_env"
		# both sides' engines one chunk at a time, as before the window
		win=/sys/module/clanq/parameters/rdma_window
		if [ -n "$window" ]; then
			name="$name rdma_window=$window"
			win_was=$(cat $win)
			echo $window > $win
		fi
		if [ $role = b ]; then
			timeout $fab_serve env FI_PROVIDER_PATH=/clanq/fabric $fab_env /clanq/fabric/fi_pingpong \
				-p "$prov" -e $ep -c -S $s -I $n -B $fab_port > $t/fab-server 2>&1
			rc=$?
			[ -n "$window" ] && echo $win_was > $win
			case $run in
			base-*)	[ $rc = 0 ] || echo "== b: $name: the baseline's server exited $rc: $(tail -c 300 $t/fab-server)" ;;
			*)	if [ $rc = 0 ]; then ok "$name (server)"
				else bad "$name (server)" "exited $rc: $(tail -c 400 $t/fab-server)"; fi ;;
			esac
			continue
		fi
		t0=$(uptime_s)
		while :; do
			env FI_PROVIDER_PATH=/clanq/fabric $fab_env /clanq/fabric/fi_pingpong \
				-p "$prov" -e $ep -c -S $s -I $n -P $fab_port $other > $t/fab-client 2>&1
			rc=$?
			# refused: b's server is not up yet
			[ $rc != 0 ] && grep -qi "refused\|connect" $t/fab-client &&
				[ $(($(uptime_s) - t0)) -lt 90 ] || break
			sleep 1
		done
		[ -n "$window" ] && echo $win_was > $win
		cat $t/fab-client
		# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
		usec=$(awk '$1 ~ /^[0-9]/ && ($2 == $3 || "=" $2 == $3) { print $7 }' $t/fab-client)
		case $run in
		base-tcp:*)	base_tcp=$usec
				[ -n "$usec" ] || echo "== a: $name: no result (exit $rc): $(tail -c 300 $t/fab-client)" ;;
		*)	if [ $rc = 0 ] && [ -n "$usec" ] && ! grep -q "Error at" $t/fab-client; then
				ok "$name"
				[ $ep = rdm ] && [ $s = 8 ] && clanq_rdm=$usec
				[ $ep = msg ] && [ $s = 8 ] && case $run in
					spin-*)	clanq_spin=$usec ;;
					win1-*)	clanq_win1=$usec ;;
					*)	clanq_msg=$usec ;;
				esac
				[ $ep = msg ] && [ $s = 1048576 ] && case $run in
					ring-*)	clanq_ring1m=$usec ;;
					msg:*)	clanq_rndv1m=$usec ;;
				esac
			else
				bad "$name" "exited $rc, not every message acked and checked: $(tail -c 400 $t/fab-client)"
			fi ;;
		esac
	done
	# usec/xfer is half a round trip, for all alike
	[ $role = a ] && [ -n "${clanq_rdm:-}" ] && awk -v c="$clanq_rdm" -v m="${clanq_msg:-}" \
		-v p="${base_tcp:-}" -v y="${clanq_spin:-}" -v w="${clanq_win1:-}" 'BEGIN {
		printf "== fi_pingpong 8 B between the hosts, usec/xfer: clanq -e msg %s, clanq;ofi_rxm -e rdm %s", m, c
		if (p != "") printf "; tcp;ofi_rxm %s: %.2fx", p, c / p
		if (y != "" && m > 0) printf "; clanq -e msg never yielding (FI_CLANQ_YIELD=0) %s: %.2fx the yielding", y, y / m
		if (w != "" && m > 0) printf "; clanq -e msg one chunk at a time (rdma_window=1) %s: %.2fx the windowed", w, w / m
		printf "\n" }'
	[ $role = a ] && [ -n "${clanq_ring1m:-}" ] && [ -n "${clanq_rndv1m:-}" ] &&
		awk -v r="$clanq_ring1m" -v v="$clanq_rndv1m" 'BEGIN {
		printf "== fi_pingpong -e msg 1 MiB between the hosts, usec/xfer: rendezvous %s, through the ring (FI_CLANQ_RNDV_SIZE=0) %s: %.2fx the rendezvous\n", v, r, r / v }'
fi

# step NAME CMD...: CMD's output shown, its status one result
step() {
	name=$1; shift
	"$@" > $t/$name 2>&1
	rc=$?
	cat $t/$name
	if [ $rc = 0 ]; then ok "$name"; else bad "$name" "'$*' exited $rc"; fi
	return $rc
}

# ib-send-lat (pair-run): perftest's ib_send_lat on the same two rxe
# devices, 32-byte SENDs: what raw verbs take for the round trip that
# clanq's OOB ping-pong measured above (perftest prints half a round
# trip; the ratio compares whole ones). b serves, a retries until b does.
gid_index() {
	for g in /sys/class/infiniband/$rdev/ports/1/gids/*; do
		grep -q "0000:0000:0000:0000:0000:ffff:" $g 2>/dev/null && { echo ${g##*/}; return; }
	done
	echo 0
}
if ! [ -f /clanq/pair-suite ] && command -v ib_send_lat > /dev/null && [ $net_ok = 1 ]; then
	n=$((count < 5000 ? count : 5000))
	lat="ib_send_lat -d $rdev -x $(gid_index) -F -s 32 -n $n"
	if [ $role = b ]; then
		step ib-send-lat $lat
	else
		i=0
		while ! $lat $other > $t/perf 2>&1 && [ $i -lt 60 ]; do
			sleep 0.5
			i=$((i + 1))
		done
		cat $t/perf
		# bytes iterations t_min t_max t_typical ...: half round trips
		typ=$(awk '$1 == 32 && NF >= 5 { print $5 }' $t/perf)
		med=$(awk -v c=$count '$1 == 32 && $2 == c { print $4 }' $t/client 2>/dev/null)
		if [ -n "$typ" ]; then
			ok "ib-send-lat"
			[ -n "$med" ] && awk -v m="$med" -v h="$typ" 'BEGIN {
				printf "== round trip, 32 bytes, same rxe devices: clanq OOB %.1f us (median),", m
				printf " raw verbs ib_send_lat %.1f us (2 x typical): %.2fx\n", 2 * h, m / (2 * h) }'
		else
			bad "ib-send-lat" "no result from ib_send_lat: $(tail -n 3 $t/perf)"
		fi
	fi
fi

# rdma-write-lat, ib-write-lat, rdma-write-bw, ib-write-bw-* (pair-run):
# clanq's RDMA writes between the hosts (examples/clanq-rdma-pingpong.c:
# both sides export a region, learn the other's over OOB messages and
# import it) beside perftest's ib_write_lat and ib_write_bw on the same
# rxe devices with the same sizes, and the ratios. Each pair runs back to
# back (the host's load changes over a run, and the round trip with it).
# b serves one program after the other, each bounded (the clanq server
# by its --seconds and timeout, perftest's by timeout: they would wait
# for ever); a runs each client as soon as the one before is done,
# retrying until b serves it (the clanq client its hello for 120 s;
# perftest its connection for 60 s, on a port of its own per run, so it
# never reaches b's previous server).
# Round trips: clanq's median beside ib_write_lat's 2 x t_typical (it
# prints half a round trip), and the minimums, which the load touches
# least. Bandwidth in MB/s = 10^6 bytes/s: perftest's "BW average[MB/sec]"
# is MiB/s (it divides by 0x100000), so it is converted; its MsgRate has
# too few digits at 1 MiB (0.000020 Mpps) to be used instead. Both clocks
# run from the first post to the last completion.
wn=$((count < 2000 ? count : 2000))		# round trips, both programs
wsizes="65536 262144 1048576"			# bandwidth: bytes per write
wbytes=$((32 << 20))				# written per point (clanq: at most 10 s)
wport=18516					# perftest: one port per run from here
wserve=300					# b's clanq servers: seconds at most
size_name() { [ $1 -ge 1048576 ] && echo "$(($1 >> 20))m" || echo "$(($1 >> 10))k"; }
# perftest's client, retried until b's server answers (60 s)
perf_client() {
	out=$1; shift
	i=0
	while ! "$@" > $out 2>&1 && [ $i -lt 120 ]; do
		sleep 0.5
		i=$((i + 1))
	done
}
# the b side of a perftest run: serve once, bounded
perf_serve() {
	name=$1; shift
	step $name timeout -s KILL 180 "$@"
}
# the b side of a clanq-rdma-pingpong run: serve one client, bounded
rp_serve() {
	step $1 timeout -s KILL $((wserve + 30)) clanq-rdma-pingpong server -t $wserve
}
# a: clanq-rdma-pingpong's client as step NAME, done if its output has
# a line matching PATTERN
rp_client() {
	name=$1 pat=$2; shift 2
	clanq-rdma-pingpong client -N $peer -w 120 "$@" > $t/$name 2>&1
	rc=$?
	cat $t/$name
	if [ $rc = 0 ] && grep -q "$pat" $t/$name; then ok "$name"
	else bad "$name" "the client: exit status $rc: $(tail -n 2 $t/$name)"; fi
}
if ! [ -f /clanq/pair-suite ] && [ $net_ok = 1 ]; then
	have_perf=0
	command -v ib_write_lat > /dev/null && command -v ib_write_bw > /dev/null && have_perf=1
	gid=$(gid_index)
	lat="ib_write_lat -d $rdev -x $gid -F -s 32 -n $wn -p $wport"
	# round trips: clanq's, then perftest's
	if [ $role = b ]; then
		[ $setup_ok = 1 ] && rp_serve rdma-write-lat
		[ $have_perf = 1 ] && perf_serve ib-write-lat $lat
	else
		if [ $setup_ok = 1 ]; then
			echo "== a: clanq-rdma-pingpong client -> node $peer: $wn round trips of" \
				"32-byte RDMA writes, waiting by blocking, then by polling"
			rp_client rdma-write-lat "^lat  *32  *$wn " -L 32 -n $wn -m block,poll
		fi
		if [ $have_perf = 1 ]; then
			perf_client $t/ib-write-lat $lat $other
			cat $t/ib-write-lat
			# bytes iterations t_min t_max t_typical ...: half round trips
			set -- $(awk '$1 == 32 && NF >= 5 { print $3, $5 }' $t/ib-write-lat)
			if [ $# = 2 ]; then
				ok "ib-write-lat"
				for m in block poll; do
					# lat bytes iters min median avg p99 max sys/rt mode
					c=$(awk -v m=$m '$1 == "lat" && $2 == 32 && $10 == m { print $4, $5 }' \
						$t/rdma-write-lat 2>/dev/null)
					[ -n "$c" ] && awk -v cmin="${c% *}" -v cmed="${c#* }" -v pmin=$1 \
						-v ptyp=$2 -v mode=$m 'BEGIN {
						r = cmed / (2 * ptyp)
						# one printf: a kernel message cannot land inside the line
						printf "== RDMA write round trip, 32 bytes: clanq %.1f us (median, %s)," \
							" ib_write_lat %.1f us (2 x typical): %.2fx (goal <= 1.2x: %s);" \
							" minimum %.1f us, %.1f us: %.2fx\n", cmed, mode, 2 * ptyp, r,
							(r <= 1.2 ? "met" : "not met"), cmin, 2 * pmin, cmin / (2 * pmin) }'
				done
			else
				bad "ib-write-lat" "no result from ib_write_lat: $(tail -n 3 $t/ib-write-lat)"
			fi
		fi
	fi
	# the same round trips with the two-message path (WRITE, then a
	# WROTE SEND: clanq_verbs write_imm=0 on both sides), for the ratio
	# of WRITE_WITH_IMM to what was there before it, in the same run
	imm=/sys/module/clanq_verbs/parameters/write_imm
	if [ $setup_ok = 1 ] && [ -w $imm ]; then
		echo 0 > $imm
		if [ $role = b ]; then
			rp_serve rdma-write-lat-wrote
		else
			rp_client rdma-write-lat-wrote "^lat  *32  *$wn " -L 32 -n $wn -m block,poll
			for m in block poll; do
				c1=$(awk -v m=$m '$1 == "lat" && $2 == 32 && $10 == m { print $5 }' \
					$t/rdma-write-lat 2>/dev/null)
				c0=$(awk -v m=$m '$1 == "lat" && $2 == 32 && $10 == m { print $5 }' \
					$t/rdma-write-lat-wrote 2>/dev/null)
				[ -n "$c1" ] && [ -n "$c0" ] && awk -v a=$c1 -v b=$c0 -v m=$m 'BEGIN {
					printf "== RDMA write round trip, 32 bytes (median, %s): WRITE with" \
						" immediate %.1f us, WRITE + WROTE %.1f us: %.2fx\n", m, a, b, a / b }'
			done
		fi
		echo 1 > $imm
	fi
	# bandwidth: clanq's, then perftest's, size by size
	if [ $role = b ]; then
		[ $setup_ok = 1 ] && rp_serve rdma-write-bw
		p=$wport
		for s in $wsizes; do
			p=$((p + 1))
			n=$((wbytes / s))
			[ $have_perf = 1 ] && perf_serve ib-write-bw-$(size_name $s) ib_write_bw \
				-d $rdev -x $gid -F -s $s -n $n -t $((n < 128 ? n : 128)) -p $p
		done
	else
		if [ $setup_ok = 1 ]; then
			echo "== a: clanq-rdma-pingpong client -> node $peer: RDMA writes of" \
				"$wsizes bytes, 1, 4 and 16 endpoints at once, $((wbytes >> 20)) MiB each"
			rp_client rdma-write-bw "^bw  *1048576  *16 " -B $(echo $wsizes | tr ' ' ,) \
				-E 1,4,16 -D 4 -b $wbytes -t 10
		fi
		p=$wport
		for s in $wsizes; do
			[ $have_perf = 1 ] || break
			p=$((p + 1))
			n=$((wbytes / s))
			name=ib-write-bw-$(size_name $s)
			perf_client $t/$name ib_write_bw -d $rdev -x $gid -F -s $s -n $n \
				-t $((n < 128 ? n : 128)) -p $p $other
			cat $t/$name
			# bytes iterations BW-peak BW-average[MiB/s] MsgRate[Mpps]
			avg=$(awk -v s=$s '$1 == s && NF >= 5 { print $4 }' $t/$name)
			if [ -z "$avg" ]; then
				bad "$name" "no result from ib_write_bw: $(tail -n 3 $t/$name)"
				continue
			fi
			ok "$name"
			# clanq's best row for this size: MB/s and its endpoints
			best=$(awk -v s=$s '$1 == "bw" && $2 == s && $7 > best { best = $7; eps = $3 }
				END { if (best) print best, eps }' $t/rdma-write-bw 2>/dev/null)
			[ -n "$best" ] && awk -v c="${best% *}" -v e="${best#* }" -v a=$avg -v s=$s 'BEGIN {
				p = a * 1.048576; x = c / p
				printf "== RDMA write bandwidth, %d KiB: clanq %.1f MB/s (best: %d endpoints)," \
					" ib_write_bw %.1f MB/s (its %.2f MiB/s): %.2fx (goal >= 0.9x: %s)\n",
					s / 1024, c, e, p, a, x, (x >= 0.9 ? "met" : "not met") }'
		done
	fi
fi

# rdma-read (pair-run): clanq's one-sided READs and fetch-and-adds
# (clanq-rdma-pingpong --read-lat, --atomic-lat, --read-bw, --atomic-bw)
# beside perftest's ib_read_lat, ib_atomic_lat, ib_read_bw and
# ib_atomic_bw. perftest prints a READ's and an atomic's whole time (no
# half round trip): clanq's median beside its t_typical.
if ! [ -f /clanq/pair-suite ] && [ $net_ok = 1 ]; then
	have_rperf=0
	command -v ib_read_lat > /dev/null && command -v ib_atomic_lat > /dev/null &&
		command -v ib_read_bw > /dev/null && command -v ib_atomic_bw > /dev/null &&
		have_rperf=1
	gid=$(gid_index)
	rp=$((wport + 20))
	rl="ib_read_lat -d $rdev -x $gid -F -s 32 -n $wn -p $rp"
	al="ib_atomic_lat -d $rdev -x $gid -F -n $wn -p $((rp + 1))"
	rb="ib_read_bw -d $rdev -x $gid -F -s 65536 -n 512 -p $((rp + 2))"
	ab="ib_atomic_bw -d $rdev -x $gid -F -n $((wn * 4)) -p $((rp + 3))"
	if [ $role = b ]; then
		[ $setup_ok = 1 ] && rp_serve rdma-read
		if [ $have_rperf = 1 ]; then
			perf_serve ib-read-lat $rl
			perf_serve ib-atomic-lat $al
			perf_serve ib-read-bw $rb
			perf_serve ib-atomic-bw $ab
		fi
	else
		if [ $setup_ok = 1 ]; then
			echo "== a: clanq-rdma-pingpong client -> node $peer: one-sided READs of" \
				"32 bytes and fetch-and-adds, $wn each; READs of 64 KiB and" \
				"fetch-and-adds from 1 and 4 endpoints"
			rp_client rdma-read "^read  *32  *$wn " -r 32 -a -n $wn -G 65536 -A \
				-E 1,4 -D 4 -b $((32 << 20)) -t 10
		fi
		if [ $have_rperf = 1 ]; then
			for x in "ib-read-lat:$rl" "ib-atomic-lat:$al" "ib-read-bw:$rb" "ib-atomic-bw:$ab"; do
				name=${x%%:*}
				perf_client $t/$name ${x#*:} $other
				cat $t/$name
			done
			# lat: bytes iterations t_min t_max t_typical ...
			for x in "read:32:ib-read-lat" "fadd:8:ib-atomic-lat"; do
				set -- $(echo $x | tr : ' ')
				p=$(awk -v s=$2 '$1 == s && NF >= 5 { print $3, $5 }' $t/$3)
				if [ -z "$p" ]; then
					bad "$3" "no result from it: $(tail -n 3 $t/$3)"
					continue
				fi
				ok "$3"
				c=$(awk -v k=$1 -v s=$2 '$1 == k && $2 == s { print $4, $5 }' \
					$t/rdma-read 2>/dev/null)
				[ -n "$c" ] && awk -v k=$1 -v cmin="${c% *}" -v cmed="${c#* }" \
					-v pmin="${p% *}" -v ptyp="${p#* }" -v who=$3 'BEGIN {
					printf "== RDMA %s latency: clanq %.1f us (median), %s %.1f us" \
						" (typical): %.2fx; minimum %.1f us, %.1f us: %.2fx\n", k,
						cmed, who, ptyp, cmed / ptyp, cmin, pmin, cmin / pmin }'
			done
			# bw: bytes iterations BW-peak BW-average[MiB/s] MsgRate[Mpps]
			p=$(awk '$1 == 65536 && NF >= 5 { print $4 }' $t/ib-read-bw)
			c=$(awk '$1 == "readbw" && $2 == 65536 && $7 > b { b = $7 } END { if (b) print b }' \
				$t/rdma-read 2>/dev/null)
			if [ -n "$p" ]; then
				ok "ib-read-bw"
				[ -n "$c" ] && awk -v c=$c -v a=$p 'BEGIN { p = a * 1.048576
					printf "== RDMA READ bandwidth, 64 KiB: clanq %.1f MB/s (best), ib_read_bw" \
						" %.1f MB/s: %.2fx\n", c, p, c / p }'
			else
				bad "ib-read-bw" "no result from it: $(tail -n 3 $t/ib-read-bw)"
			fi
			p=$(awk '$1 == 8 && NF >= 5 { print $5 }' $t/ib-atomic-bw)
			c=$(awk '$1 == "faddbw" && $7 > b { b = $7 } END { if (b) print b }' \
				$t/rdma-read 2>/dev/null)
			if [ -n "$p" ]; then
				ok "ib-atomic-bw"
				[ -n "$c" ] && awk -v c=$c -v p=$p 'BEGIN {
					printf "== RDMA fetch-and-add rate: clanq %.3f Mops/s (best), ib_atomic_bw" \
						" %.3f Mpps: %.2fx\n", c, p, c / p }'
			else
				bad "ib-atomic-bw" "no result from it: $(tail -n 3 $t/ib-atomic-bw)"
			fi
		fi
	fi
fi

if [ -f /clanq/pair-suite ] && [ $setup_ok = 1 ] && [ $net_ok = 1 ]; then
	export CLANQ_PEER_NODE=$peer
	if [ $role = b ]; then
		step verbs-serve test_verbs serve
		# the connections a made and ours to a are up: unload under them
		step verbs-reload sh -c "rmmod clanq_verbs && insmod /clanq/clanq_verbs.ko &&
			cat /sys/class/misc/clanq0/verbs /sys/class/misc/clanq0/peers"
		test_verbs serve > $t/die 2>&1
		rc=$?
		cat $t/die
		if [ $rc = 42 ]; then
			ok "verbs-die"
			# powered off at once: init's leave, nothing unloaded
			touch /tmp/pair-die
		else
			bad "verbs-die" "the echo service exited $rc, not 42 (DIE)"
		fi
	else
		# test_verbs prints its own cmocka lines, counted one by one;
		# CLANQ_PAIR_FADDS (vm.sh): its remote counter's count
		[ -f /clanq/pair-fadds ] && export CLANQ_PAIR_FADDS=$(cat /clanq/pair-fadds)
		RDMADEV=$rdev test_verbs || failed=$((failed + 1))
		step verbs-reconnect test_verbs reconnect
		step verbs-deaf test_verbs deaf
		step verbs-hostile test_verbs hostile
		# the same attack on the old rule (a's test_trust_notices): the
		# step above must be able to fail, and does, every run
		trust=/sys/module/clanq_verbs/parameters/test_trust_notices
		if [ -w $trust ]; then
			echo Y > $trust
			test_verbs hostile > $t/unchecked 2>&1
			rc=$?
			echo N > $trust
			cat $t/unchecked
			if [ $rc != 0 ] && grep -q "forged notice reached" $t/unchecked; then
				ok "verbs-hostile-unchecked"
			else
				bad "verbs-hostile-unchecked" "on the old rule the forgeries reached nobody (exit $rc)"
			fi
		fi
		RDMADEV=$rdev RDMATYPE=${rdev%0} NETDEV=$netdev \
			step verbs-device-gone test_verbs device-gone
		step verbs-survivor test_verbs survivor
	fi
fi
[ $failed = 0 ]
