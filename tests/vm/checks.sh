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
