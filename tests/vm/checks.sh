# What the in-VM check scripts (examples.sh, bench-smoke.sh) share,
# sourced after they set $t (their scratch directory): each check prints
# a cmocka-style line, so tests/results.awk counts them one by one, and
# $failed counts the failures.
failed=0
ok() { echo "[       OK ] $1"; }
bad() { echo "[  FAILED  ] $1"; echo "   $2"; failed=$((failed + 1)); }
# expect NAME STATUS PATTERN CMD...: CMD exits STATUS and says PATTERN
expect() {
	name=$1 want=$2 pat=$3; shift 3
	"$@" > $t/out 2>&1
	rc=$?
	if [ $rc != "$want" ]; then
		bad "$name" "'$*' exited $rc, not $want: $(head -c 400 $t/out)"
	elif ! grep -q -- "$pat" $t/out; then
		bad "$name" "'$*' did not say '$pat': $(head -c 400 $t/out)"
	else
		ok "$name"
	fi
}
# succeeds NAME CMD...: CMD exits 0 (whatever it says)
succeeds() {
	name=$1; shift
	if "$@" > $t/out 2>&1; then ok "$name"
	else bad "$name" "'$*' exited $?: $(head -c 400 $t/out)"; fi
}
# pingpong PROVIDER EP SIZE N PORT: Debian's fi_pingpong -c, its server
# on NIC 0 and its client on NIC 1 (the TCP control socket on loopback,
# PORT), each bounded by 300 s: both end 0, the client's one row says
# every message was acked, and neither found a wrong byte (fabric.sh,
# mpi.sh; fi_pingpong on the PATH, FI_PROVIDER_PATH set)
pingpong() {
	what="fi_pingpong -p \"$1\" -e $2 -c, $3 B x $4"
	timeout 300 fi_pingpong -p "$1" -e $2 -c -d clanq0 -S $3 -I $4 -B $5 > $t/server 2>&1 &
	sp=$!
	sleep 1
	timeout 300 fi_pingpong -p "$1" -e $2 -c -d clanq1 -S $3 -I $4 -P $5 127.0.0.1 > $t/client 2>&1
	rc=$?
	wait $sp
	src=$?
	cat $t/client
	if [ $rc != 0 ] || [ $src != 0 ]; then
		bad "$what" "client exited $rc, server $src: $(head -c 400 $t/client) / $(head -c 400 $t/server)"
	elif ! awk '$1 ~ /^[0-9]/ { rows++; ok += ($2 == $3 || "=" $2 == $3) } END { exit !(rows == 1 && ok == 1) }' $t/client ||
	     grep -q "Error at" $t/client $t/server; then
		bad "$what" "not every message acked or checked: $(head -c 400 $t/client)"
	else
		ok "$what"
	fi
}
