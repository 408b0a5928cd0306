#!/bin/bash
# tests/pkg: the Debian packages as an administrator gets them, each check
# one result in $CLANQ_RESULTS (or just printed when run alone).
#   deb            make deb builds the five packages
#   lintian        no error (warnings and notes are printed)
#   install        apt-get installs them (purged first: a second run
#                  starts clean)
#   dkms/<kernel>  DKMS built clanq.ko for every kernel whose headers are
#                  here and that dkms.conf accepts (6.1 or newer), installed
#                  in updates/dkms with that kernel's vermagic
#   dkms/exclusive BUILD_EXCLUSIVE_KERNEL: 6.1 and newer, nothing older
#   dkms/refuses-old  `dkms build` for a (missing) 5.15 kernel stops there
#   kbuild/refuses-old  driver/Kbuild's own check, with kbuild's VERSION
#                  and PATCHLEVEL overridden to 5.15 on 6.1 headers
#   lib/exports    libclanq.so.2 exports exactly the functions of clanq.h,
#                  clanq/net.h and clanq/admin.h that are not static inline
#   lib/link       a program built with pkg-config against libclanq-dev:
#                  NEEDED libclanq.so.2, its symbols versioned (one of the
#                  first release, LIBCLANQ_0.2; one of this one's,
#                  LIBCLANQ_<ver>)
#   fabric/provider  libfabric-clanq put libclanq-fi.so in libfabric's
#                  provider directory: Debian's fi_info lists provider
#                  clanq at this version with no FI_PROVIDER_PATH, the
#                  .so exports fi_prov_ini only
#   man            the installed man pages are found and render
#                  (SKIP while docs/man/ has none)
# The packages stay installed: a later stage boots the 6.12 module DKMS
# built, and build/deb/*.deb stay where make deb put them.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit
results=${CLANQ_RESULTS:-/dev/null}
log=$root/build/pkg.log
mkdir -p build
: > "$log"
fails=0

result() {	# result PASS|FAIL|SKIP name [why]
	if [ "$1" = SKIP ]; then
		echo "SKIP pkg/$2" >> "$results"
	else
		echo "$1 pkg/$2${3:+: $3}" >> "$results"
	fi
	case $1 in
	PASS) printf '  %-44s ok\n' "$2" ;;
	SKIP) printf '  %-44s skipped %s\n' "$2" "${3:-}" ;;
	*)    printf '  %-44s FAILED %s\n' "$2" "${3:-}"
	      fails=$((fails + 1)) ;;
	esac
}

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

finish() {
	echo "pkg: $fails failed (log: $log)"
	[ $fails = 0 ]
	exit
}

scripts/deps.sh || { result FAIL deps "scripts/deps.sh failed"; finish; }

version=$(make --no-print-directory -s print-version)
pkgs=(clanq-dkms libclanq2 libclanq-dev clanq-tools libfabric-clanq)
src=/usr/src/clanq-$version

# -- (a) the packages --
t0=$(date +%s)
if make --no-print-directory deb >>"$log" 2>&1; then
	result PASS deb
	echo "      make deb: $(( $(date +%s) - t0 )) s"
else
	tail -n 20 "$log" | sed 's/^/      /'
	result FAIL deb "see $log and build/deb/build.log"
	finish
fi
debs=()
for p in "${pkgs[@]}"; do
	f=$(ls build/deb/"${p}"_"${version}"_*.deb 2>/dev/null | head -n 1)
	[ -n "$f" ] || { result FAIL deb "no ${p}_${version}_*.deb in build/deb"; finish; }
	debs+=("./$f")
done

# -- (b) lintian: errors fail, the rest is printed --
# (as root it says it would rather not be: that line is not a finding)
out=$(lintian --display-info --pedantic build/deb/*.changes 2>&1 |
	grep -v '^running with root privileges')
echo "$out" >> "$log"
errs=$(echo "$out" | grep -c '^E:')
if [ -n "$out" ]; then
	echo "$out" | sed 's/^/      /'
fi
if [ "$errs" = 0 ]; then
	result PASS lintian
else
	result FAIL lintian "$errs errors"
fi

# -- (c) install; DKMS builds for each kernel with headers --
installed=()
# libclanq1: the library before soname 2, which nothing replaces by name
for p in "${pkgs[@]}" libclanq1; do
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] &&
		installed+=("$p")
done
if [ ${#installed[@]} != 0 ]; then
	echo "      purging ${installed[*]}"
	sudo_ env DEBIAN_FRONTEND=noninteractive apt-get purge -y "${installed[@]}" >>"$log" 2>&1
fi
ilog=$root/build/pkg-install.log
t0=$(date +%s)
if sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	"${debs[@]}" > "$ilog" 2>&1; then
	result PASS install
	echo "      apt-get install (DKMS builds included): $(( $(date +%s) - t0 )) s"
else
	tail -n 20 "$ilog" | sed 's/^/      /'
	result FAIL install "see $ilog"
	finish
fi
cat "$ilog" >> "$log"

# dkms.conf's own test of a kernel release (in a subshell: it is bash)
accepts() {
	(
		set +u
		# shellcheck disable=SC2034  # dkms.conf may use it
		kernelver=$1
		# shellcheck disable=SC1091
		. "$src/dkms.conf"
		[[ $1 =~ $BUILD_EXCLUSIVE_KERNEL ]]
	)
}

kernels=()
for d in /lib/modules/*/build; do
	[ -f "$d/Makefile" ] && kernels+=("$(basename "$(dirname "$d")")")
done
[ ${#kernels[@]} != 0 ] || result FAIL dkms "no kernel headers in /lib/modules/*/build"
for k in "${kernels[@]}"; do
	if ! accepts "$k"; then
		echo "      $k: older than 6.1, not built (BUILD_EXCLUSIVE_KERNEL)"
		continue
	fi
	how="by clanq-dkms's postinst"
	if ! dkms status clanq/"$version" -k "$k" 2>/dev/null | grep -q ': installed'; then
		how="by hand (dkms install): the postinst did not"
		t0=$(date +%s)
		sudo_ dkms install clanq/"$version" -k "$k" >>"$log" 2>&1
		how+=", $(( $(date +%s) - t0 )) s"
	elif ! tr -d '\r' < "$ilog" | grep -qFx "Building initial module for $k"; then
		how="before the postinst ran (already installed)"
	fi
	echo "      $k: built $how"
	st=$(dkms status clanq/"$version" -k "$k" 2>/dev/null)
	ko=$(ls /lib/modules/"$k"/updates/dkms/clanq.ko* 2>/dev/null | head -n 1)
	if ! echo "$st" | grep -q ': installed'; then
		result FAIL "dkms/$k" "dkms status: ${st:-nothing}"
	elif [ -z "$ko" ]; then
		result FAIL "dkms/$k" "no /lib/modules/$k/updates/dkms/clanq.ko*"
	elif ! ls /lib/modules/"$k"/updates/dkms/clanq_verbs.ko* >/dev/null 2>&1; then
		result FAIL "dkms/$k" "no /lib/modules/$k/updates/dkms/clanq_verbs.ko* (the verbs wire)"
	else
		vm=$(modinfo -F vermagic "$ko" | awk '{print $1}')
		if [ "$vm" = "$k" ]; then
			result PASS "dkms/$k"
		else
			result FAIL "dkms/$k" "$ko has vermagic $vm"
		fi
	fi
done

# the issue's two series: make deps installs both, so both must be here
for series in 6.1 6.12; do
	printf '%s\n' "${kernels[@]}" | grep -q "^${series//./\\.}\." ||
		result FAIL "dkms/$series" "no $series kernel headers in /lib/modules (make deps)"
done

# -- (d) older kernels refused --
bad=
for k in 5.15.0-1-amd64 6.0.12 6.0.0-1-amd64; do
	accepts "$k" && bad+=" $k accepted"
done
for k in 6.1.0-56-amd64 6.1 6.12.117+deb12-amd64 6.13.1 7.0.1; do
	accepts "$k" || bad+=" $k refused"
done
if [ -z "$bad" ]; then
	result PASS dkms/exclusive
else
	result FAIL dkms/exclusive "BUILD_EXCLUSIVE_KERNEL:$bad"
fi

# dkms itself, for a kernel that is not here: it must stop at the
# BUILD_EXCLUSIVE test (status 77), before it looks for headers
old=5.15.0-1-amd64
if [ -e "/lib/modules/$old" ]; then
	result SKIP dkms/refuses-old "/lib/modules/$old exists"
else
	out=$(sudo_ dkms build clanq/"$version" -k "$old" 2>&1)
	rc=$?
	echo "$out" >> "$log"
	if [ $rc = 77 ] && echo "$out" | grep -q 'BUILD_EXCLUSIVE'; then
		result PASS dkms/refuses-old
	else
		echo "$out" | tail -n 5 | sed 's/^/      /'
		result FAIL dkms/refuses-old "dkms build -k $old: status $rc"
	fi
	sudo_ rm -rf "/var/lib/dkms/clanq/$version/$old"
fi

# driver/Kbuild's check, on the installed source, against the oldest
# headers here with kbuild's VERSION/PATCHLEVEL said to be 5.15: the
# condition and the message, not a real 5.15 tree
kdir=
for k in "${kernels[@]}"; do
	accepts "$k" && { kdir=/lib/modules/$k/build; break; }
done
if [ -z "$kdir" ]; then
	result SKIP kbuild/refuses-old "no 6.1+ headers"
else
	tmp=$(mktemp -d)
	cp -r "$src/driver" "$src/include" "$tmp/"
	out=$(make -C "$kdir" M="$tmp/driver" CLANQ_ROOT="$tmp" VERSION=5 PATCHLEVEL=15 \
		modules 2>&1)
	rc=$?
	echo "$out" >> "$log"
	if [ $rc != 0 ] && echo "$out" | grep -q 'clanq needs Linux 6.1 or newer; this is 5.15'; then
		result PASS kbuild/refuses-old
	else
		echo "$out" | tail -n 5 | sed 's/^/      /'
		result FAIL kbuild/refuses-old "make status $rc, no message"
	fi
	rm -rf "$tmp"
fi

# -- (e) the installed library --
so=$(ls /usr/lib/*/libclanq.so.2 2>/dev/null | head -n 1)
# the headers' functions that are not static inline: a prototype's first line
want=$(awk '/^static/ { next }
	/^[a-z_][a-z0-9_ ]*[ *]clanq_[a-z0-9_]+\(/ {
		match($0, /clanq_[a-z0-9_]+\(/)
		print substr($0, RSTART, RLENGTH - 1)
	}' /usr/include/clanq.h /usr/include/clanq/net.h /usr/include/clanq/admin.h | sort -u)
have=$(nm -D --defined-only "$so" 2>/dev/null | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u)
if [ -z "$so" ]; then
	result FAIL lib/exports "no /usr/lib/*/libclanq.so.2"
elif [ "$want" = "$have" ]; then
	result PASS lib/exports
	echo "      $(echo "$have" | wc -l) functions exported"
else
	diff <(echo "$want") <(echo "$have") | grep '^[<>]' | sed 's/^/      /' | head -n 20
	result FAIL lib/exports "$(diff <(echo "$want") <(echo "$have") | grep -c '^[<>]') differences (<: in the headers only, >: exported only)"
fi

tmp=$(mktemp -d)
cat > "$tmp/t.c" <<'EOF'
#include <clanq.h>
#include <clanq/net.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	struct clanq_dev dev;
	int err = clanq_open_nic(&dev, 0);

	char why[160];

	if (!err) {
		printf("last error: '%s'\n", clanq_strerror_last(&dev));
		clanq_close(&dev);
	} else {
		clanq_open_nic_explain(0, err, why, sizeof(why));
		printf("%s\n", why);
	}
	printf("clanq_open_nic: %d\n", err);
	if (argc > 99 && argv) {	/* linked, never run */
		clanq_net_trywait(NULL, NULL, 0);
		clanq_region_export_flags(NULL, 0, 0, NULL);
	}
	return 0;
}
EOF
why=
# shellcheck disable=SC2046
if [ "$(pkg-config --modversion libclanq 2>&1)" != "$version" ]; then
	why="pkg-config --modversion libclanq: $(pkg-config --modversion libclanq 2>&1)"
elif ! cc -std=gnu11 -Wall -Wextra -Werror -o "$tmp/t" "$tmp/t.c" \
	$(pkg-config --cflags --libs libclanq) >>"$log" 2>&1; then
	why="does not build with pkg-config's flags"
elif ! readelf -d "$tmp/t" | grep -q 'NEEDED.*\[libclanq\.so\.2\]'; then
	why="no NEEDED libclanq.so.2"
elif ! objdump -T "$tmp/t" | grep -q "(LIBCLANQ_0\.2) *clanq_open_nic\$"; then
	why="clanq_open_nic not versioned LIBCLANQ_0.2"
elif ! objdump -T "$tmp/t" | grep -q "(LIBCLANQ_0\.3) *clanq_strerror_last\$"; then
	why="clanq_strerror_last not versioned LIBCLANQ_0.3"
elif ! objdump -T "$tmp/t" | grep -q "(LIBCLANQ_0\.4) *clanq_open_nic_explain\$"; then
	why="clanq_open_nic_explain not versioned LIBCLANQ_0.4"
elif ! objdump -T "$tmp/t" | grep -q "(LIBCLANQ_0\.5) *clanq_net_trywait\$"; then
	why="clanq_net_trywait not versioned LIBCLANQ_0.5"
elif ! objdump -T "$tmp/t" | grep -q "(LIBCLANQ_$version) *clanq_region_export_flags\$"; then
	why="clanq_region_export_flags not versioned LIBCLANQ_$version"
elif [ "$(readlink -f "$(ldd "$tmp/t" | awk '$1 == "libclanq.so.2" { print $3 }')")" != \
	"$(readlink -f "$so")" ]; then
	why="ldd: $(ldd "$tmp/t" | grep libclanq) (not $so)"
elif ! "$tmp/t" >>"$log" 2>&1; then
	why="does not run"
fi
if [ -z "$why" ]; then
	result PASS lib/link
	echo "      $(objdump -T "$tmp/t" | grep -c "LIBCLANQ_") symbols LIBCLANQ_*; $(ldd "$tmp/t" | grep -o 'libclanq.so.2 => [^ ]*')"
else
	result FAIL lib/link "$why"
fi
rm -rf "$tmp"

# -- (f) the libfabric provider, found where libfabric looks --
prov=$(ls /usr/lib/*/libfabric/libclanq-fi.so 2>/dev/null | head -n 1)
why=
if [ -z "$prov" ]; then
	why="no /usr/lib/*/libfabric/libclanq-fi.so"
elif ! command -v fi_info >/dev/null; then
	why="no fi_info (libfabric-bin: scripts/deps.sh)"
else
	# fi_info -l: every provider libfabric loaded, with its version
	list=$(env -u FI_PROVIDER_PATH -u FI_PROVIDER fi_info -l 2>&1)
	got=$(echo "$list" | awk '$1 == "clanq:" { getline; print $2 }')
	exports=$(nm -D --defined-only "$prov" | awk '$2 != "A" { print $3 }' | tr '\n' ' ')
	if [ "$got" != "$version" ]; then
		why="fi_info -l (no FI_PROVIDER_PATH) lists clanq at '${got:-nothing}', not $version"
	elif [ "$exports" != "fi_prov_ini " ]; then
		why="$prov exports: $exports"
	fi
fi
if [ -z "$why" ]; then
	result PASS fabric/provider
	echo "      $prov: fi_info -l lists clanq $version"
else
	result FAIL fabric/provider "$why"
fi

# -- (g) man pages --
pages=$(ls docs/man/*.[1-8] provider/fi_clanq.7 2>/dev/null)
if [ -z "$pages" ]; then
	result SKIP man "no docs/man/*.[1-8] in this tree"
else
	bad=
	man -w clanq >/dev/null 2>&1 || bad+=" 'man -w clanq' finds nothing;"
	for f in $pages; do
		b=$(basename "$f")
		sec=${b##*.}
		name=${b%.*}
		if ! man -w "$sec" "$name" >/dev/null 2>&1; then
			bad+=" $name($sec) not installed;"
			continue
		fi
		warn=$(MANWIDTH=80 man --warnings "$sec" "$name" 2>&1 >/dev/null)
		[ -z "$warn" ] || bad+=" $name($sec): $(echo "$warn" | head -n 1);"
	done
	if [ -z "$bad" ]; then
		result PASS man
	else
		result FAIL man "${bad%;}"
	fi
fi

# -- (h) what later stages use --
for k in "${kernels[@]}"; do
	for ko in /lib/modules/"$k"/updates/dkms/clanq.ko*; do
		[ -e "$ko" ] && echo "      module for $k: $ko"
	done
done
echo "      packages: $(cd build/deb && ls -- *.deb | tr '\n' ' ')(installed: ${pkgs[*]})"
finish
