# clanq as a user installs it (vm.sh pkg, the stock Debian kernel): the
# module DKMS built from the clanq-dkms package on the host, libclanq2
# and clanq-tools installed here by dpkg, and then, as users who are not
# root: the device open to everyone by default; with the site's group
# switch on (udev/61-clanq-group.rules: group clanq, mode 0660, applied
# here by hand, there is no udev in this VM) a member's echo ping-pong
# runs and a non-member is refused with a message that names the group.
# libfabric-clanq: Debian's fi_info and fi_pingpong (copied in by vm.sh)
# find the provider where the package put it, with no FI_PROVIDER_PATH.
# Each check prints a cmocka-style line (tests/results.awk counts them).
set -u
t=/tmp/pkg
mkdir -p $t
. /clanq/checks.sh
export PATH=/usr/bin:/usr/sbin:$PATH

# users: alice is in group clanq (what `adduser alice clanq` does), bob is not
cat > /etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/sh
alice:x:1000:1000:alice:/tmp:/bin/sh
bob:x:1001:1001:bob:/tmp:/bin/sh
EOF
cat > /etc/group <<'EOF'
root:x:0:
clanq:x:990:alice
alice:x:1000:
bob:x:1001:
EOF
as() { u=$1; shift; su -s /bin/sh -c "$*" "$u"; }

# ---- install ----
mkdir -p /var/lib/dpkg/info /var/lib/dpkg/updates
touch /var/lib/dpkg/status
for deb in /clanq/deb/libclanq2_*.deb /clanq/deb/clanq-tools_*.deb \
	/clanq/deb/libfabric-clanq_*.deb; do
	# busybox's dpkg does not know the host's libc6 package: --force-depends
	succeeds "dpkg -i ${deb##*/}" dpkg -i --force-depends "$deb"
done
for p in libclanq2 clanq-tools libfabric-clanq; do
	if dpkg -l 2>/dev/null | grep -q "^ii  $p "; then ok "$p is installed"
	else bad "$p is installed" "$(dpkg -l 2>&1 | head -c 400)"; fi
done
for f in /usr/bin/clanq-echo-server /usr/bin/clanq-echo-client /usr/bin/clanqstat \
	/usr/bin/clanqctl /usr/bin/clanq-bench /usr/bin/clanq-info; do
	if [ -x $f ]; then ok "installed: $f"; else bad "installed: $f" "missing"; fi
done
ko=$(ls /lib/modules/$(uname -r)/updates/dkms/clanq.ko 2>/dev/null)
succeeds "insmod the module DKMS built (${ko:-none})" insmod "$ko" nr_nics=2

# every parameter says its default (modinfo), and the default is so
n=0 wrong=
while IFS= read -r line; do
	name=${line%%:*}
	case "$line" in *"Testing:"*) continue ;; esac
	def=$(echo "$line" | sed -n 's/.*default \([0-9YN][0-9]*\).*/\1/p')
	if [ -z "$def" ]; then wrong="$wrong $name: no default;"; continue; fi
	[ $name = nr_nics ] && continue		# loaded with nr_nics=2
	v=$(cat /sys/module/clanq/parameters/$name)
	[ "$v" = "$def" ] || wrong="$wrong $name is $v, modinfo says $def;"
	n=$((n + 1))
done < /clanq/modinfo-parm
if [ -z "$wrong" ] && [ $n -ge 10 ]; then ok "modinfo gives every parameter's default, and it holds ($n)"
else bad "modinfo gives every parameter's default, and it holds" "$n checked;$wrong"; fi

# ---- open to everyone by default ----
# (services 2021, 2022: below 1024 a listener needs CAP_NET_BIND_SERVICE)
mode=$(ls -l /dev/clanq0 | cut -c1-10)
if [ "$mode" = crw-rw-rw- ]; then ok "/dev/clanq0 is mode 0666 by default"
else bad "/dev/clanq0 is mode 0666 by default" "it is $mode"; fi
as bob "clanq-echo-server -n 0 -s 2021 -x 1" > $t/server-bob 2>&1 &
server=$!
expect "bob (no group) echoes by default, polling" 0 "^1024 " \
	as bob "clanq-echo-client -n 1 -s 2021 -m 100 -S 8,1k -p"
wait $server || bad "bob's echo server" "$(cat $t/server-bob)"

# ---- the group switch: group clanq, mode 0660 ----
chgrp clanq /dev/clanq0 /dev/clanq1
chmod 0660 /dev/clanq0 /dev/clanq1
before=$(cat /sys/class/misc/clanq0/statistics/oob_sent)
as alice "clanq-echo-server -n 0 -s 2022 -x 2" > $t/server-alice 2>&1 &
server=$!
expect "alice (group clanq) echoes, polling" 0 "^1024 " \
	as alice "clanq-echo-client -n 1 -s 2022 -m 100 -S 8,1k -p"
expect "alice (group clanq) echoes, blocking" 0 "^1024 " \
	as alice "clanq-echo-client -n 0 -s 2022 -m 100 -S 8,1k -B"
wait $server || bad "alice's echo server" "$(cat $t/server-alice)"
# the provider as libfabric-clanq installed it: no FI_PROVIDER_PATH
unset FI_PROVIDER_PATH FI_PROVIDER
expect "alice: fi_info -p clanq lists clanq0 (no FI_PROVIDER_PATH)" 0 "domain: clanq0" \
	as alice "fi_info -p clanq"
expect "alice: fi_info -p clanq lists clanq1" 0 "domain: clanq1" as alice "fi_info -p clanq"
# (each bounded: a server whose client failed would wait for it forever)
as alice "timeout 120 fi_pingpong -p clanq -e msg -c -d clanq0 -S 4096 -I 200 -B 47700" \
	> $t/fi-server 2>&1 &
server=$!
sleep 1
expect "alice: fi_pingpong -p clanq -e msg -c, 4 KiB, NIC 1 to NIC 0" 0 "^4k  *200 " \
	as alice "timeout 120 fi_pingpong -p clanq -e msg -c -d clanq1 -S 4096 -I 200 -P 47700 127.0.0.1"
wait $server || bad "alice's fi_pingpong server" "$(head -c 400 $t/fi-server)"
# 1 MiB: a rendezvous (the receiver's engine reads the sender's pinned
# buffer), with the server's memlock limit too small to pin one: its
# receives go through the bounce region, its own sends in pieces
as alice "ulimit -l 64; FI_LOG_LEVEL=info timeout 120 fi_pingpong -p clanq -e msg -c -d clanq0 -S 1048576 -I 20 -B 47701" \
	> $t/fi-server2 2>&1 &
server=$!
sleep 1
expect "alice: fi_pingpong -p clanq -e msg -c, 1 MiB, the server's memlock 64 KiB" 0 "^1m  *20 " \
	as alice "timeout 120 fi_pingpong -p clanq -e msg -c -d clanq1 -S 1048576 -I 20 -P 47701 127.0.0.1"
wait $server || bad "alice's 1 MiB fi_pingpong server" "$(tail -c 400 $t/fi-server2)"
expect "alice: the server that cannot pin sends in pieces" 0 "sending it in pieces" \
	cat $t/fi-server2
expect "bob (no group) is refused, and told the group" 1 "add this user to group 'clanq'" \
	as bob "clanq-echo-client -n 1 -s 2022 -m 10"
expect "bob's refusal names the mode" 1 "mode 0660, group clanq" \
	as bob "clanq-echo-client -n 1 -s 2022 -m 10"
expect "bob: clanqstat -e is refused the same way" 1 "group 'clanq'" as bob "clanqstat -e"

# ---- counters where users look ----
after=$(cat /sys/class/misc/clanq0/statistics/oob_sent)
if [ "$after" -gt "$before" ]; then ok "sysfs oob_sent counted the handshakes ($before -> $after)"
else bad "sysfs oob_sent counted the handshakes" "$before -> $after"; fi
expect "bob reads the NIC's counters (sysfs is for everyone)" 0 "oob_sent  *$after\$" \
	as bob "clanqstat -d 0"
expect "clanqstat -a shows the limits in force" 0 "max_eps 4096" as alice "clanqstat -a -d clanq1"
expect "clanqstat 0.2 3: three reports, then rates" 0 "per second over the interval" \
	as alice "clanqstat 0.2 3"
expect "clanqstat: a bad interval" 2 "INTERVAL" clanqstat 0
expect "clanqstat: no such NIC" 1 "no clanq7" clanqstat -d 7

succeeds "rmmod clanq" rmmod clanq
expect "clanqstat without the module" 1 "is clanq.ko loaded" clanqstat
[ $failed = 0 ]
