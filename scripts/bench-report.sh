#!/bin/bash
# bench-report.sh CSV OUTDIR: from clanq-bench's CSV (-o), the summary of
# ratios against the issue's targets (printed, and OUTDIR/summary.txt)
# and the paper's figures as PNGs drawn with gnuplot:
#   fig4-bw.png    bandwidth vs message size (clanq PIO and RDMA beside
#                  memcpy, UCX, Soft-RoCE, TCP, pipe)       (paper Figure 4)
#   fig5-idle.png  round trip vs idle connections held       (Figure 5)
#   fig6-load.png  throughput and server CPU per message vs clients (Figure 6)
#   lat.png        round trip vs message size, every impl
# Every ratio is of two numbers measured in the same run.
set -euo pipefail

csv=${1:?usage: bench-report.sh CSV OUTDIR}
out=${2:?usage: bench-report.sh CSV OUTDIR}
mkdir -p "$out"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# ---- the summary ----
awk -F, -v OFS=, '
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
	k = $col["test"] "/" $col["impl"] "/" $col["mode"] "/" $col["bytes"] "/" $col["param"]
	typ[k] = $col["t_typical"]; bw[k] = $col["bw_mibs"]; cpu[k] = $col["cpu_us"]
	sys[k] = $col["syscalls"]
	if ($col["test"] == "idle" && $col["param"] + 0 > maxidle) maxidle = $col["param"] + 0
	if ($col["test"] == "load" && $col["param"] + 0 > maxload) maxload = $col["param"] + 0
	if ($col["test"] == "bw") { sizes[$col["bytes"]] = 1 }
	# the system calls of each end a round trip, from the note (the last column)
	if ($col["test"] == "lat" && match($0, /sys\/rt: client [0-9.]+, server [0-9.]+/)) {
		split(substr($0, RSTART + 15, RLENGTH - 15), sides, /, server /)
		side_cli[k] = sides[1] + 0; side_srv[k] = sides[2] + 0
	}
	# polling modes that need no doorbell (PIO); RDMA ones ring one per post
	if ($col["impl"] == "clanq" && $col["mode"] ~ /^pio-poll$|^spin$|^pio$/ &&
	    $col["syscalls"] != "") {
		if (!("x" in maxsys) || $col["syscalls"] + 0 > maxsys["x"]) {
			maxsys["x"] = $col["syscalls"] + 0
			maxsys_at = $col["test"] " " $col["mode"] " " $col["bytes"] " B"
		}
	}
}
function get(a, k) { return (k in a && a[k] != "") ? a[k] + 0 : -1 }
# row: what, the ratio a/b, the target, how it compares ("le" or "ge")
function row(what, a, b, target, cmp,    r, ok) {
	if (a < 0 || b <= 0) { printf "%-62s %9s   %-8s %s\n", what, "-", target, "not measured"; return }
	r = a / b
	ok = (cmp == "le") ? (r <= target + 0) : (r >= target + 0)
	printf "%-62s %9.2f   %s %-5s %s\n", what, r, cmp == "le" ? "<=" : ">=", target, ok ? "met" : "NOT met"
}
END {
	printf "%-62s %9s   %-8s %s\n", "# ratio (same run)", "measured", "target", ""
	c8 = get(typ, "lat/clanq/pio-poll/8/0")
	row("polled 8 B round trip, clanq / raw shm", c8, get(typ, "lat/shm/spin/8/0"), 1.5, "le")
	row("  UCX tag_lat shm / clanq (how much faster clanq is)", get(typ, "lat/ucx/tag-shm/8/0"), c8, 3, "ge")
	row("  libfabric fi_pingpong shm / clanq", get(typ, "lat/libfabric/shm/8/0"), c8, 1, "ge")
	f8 = get(typ, "lat/libfabric/clanq-msg/8/0")
	row("fi_pingpong 8 B round trip over clanq (msg) / clanq echo", f8, c8, 1.2, "le")
	row("fi_pingpong 8 B round trip, clanq (msg) / shm", f8, get(typ, "lat/libfabric/shm/8/0"),
	    0.5, "le")
	row("  the same, clanq;ofi_rxm (rdm) / shm", get(typ, "lat/libfabric/clanq-rdm/8/0"),
	    get(typ, "lat/libfabric/shm/8/0"), 0.5, "le")
	row("  Soft-RoCE ib_write_lat / clanq", get(typ, "lat/rxe/ib_write_lat/8/0"), c8, 5, "ge")
	row("64 B RDMA write round trip, clanq / raw shm", get(typ, "lat/clanq/rdma-poll/64/0"),
	    get(typ, "lat/shm/spin/64/0"), 3, "le")
	row("  Soft-RoCE ib_write_lat 64 B / clanq RDMA 64 B", get(typ, "lat/rxe/ib_write_lat/64/0"),
	    get(typ, "lat/clanq/rdma-poll/64/0"), 5, "ge")
	b8 = get(typ, "lat/clanq/pio-block/8/0")
	row("blocking 8 B round trip, clanq / eventfd ping-pong", b8, get(typ, "lat/eventfd/block/8/0"), 1.0, "le")
	row("blocking 8 B round trip, clanq / blocking UDP", b8, get(typ, "lat/udp/block/8/0"), 0.5, "le")
	k = "lat/clanq/pio-block/8/0"
	if (k in side_cli) {
		w = side_cli[k] > side_srv[k] ? side_cli[k] : side_srv[k]
		printf "%-62s %9.2f   %-8s %s\n", "system calls per blocking 8 B round trip, clanq, worst side",
		       w, "<= 2", (w <= 2.05 ? "met" : "NOT met") sprintf(" (client %.2f, server %.2f)",
		       side_cli[k], side_srv[k])
	}
	row(sprintf("round trip at %d idle conns / at 1, clanq server spinning", maxidle),
	    get(typ, "idle/clanq/spin/8/" maxidle), get(typ, "idle/clanq/spin/8/1"), 1.1, "le")
	row(sprintf("round trip at %d idle conns / at 1, clanq server blocking", maxidle),
	    get(typ, "idle/clanq/block/8/" maxidle), get(typ, "idle/clanq/block/8/1"), 1.1, "le")
	row(sprintf("  the same for a poll() server (blocking)"),
	    get(typ, "idle/poll/block/8/" maxidle), get(typ, "idle/poll/block/8/1"), 1.1, "le")
	row(sprintf("  the same for an epoll server (blocking)"),
	    get(typ, "idle/epoll/block/8/" maxidle), get(typ, "idle/epoll/block/8/1"), 1.1, "le")
	cl = get(cpu, "load/clanq/evq-spin15/8/" maxload)
	row(sprintf("server CPU per message at %d clients, clanq / UDP+epoll", maxload), cl,
	    get(cpu, "load/udp/epoll/8/" maxload), 0.333, "le")
	row("server CPU per message, clanq / UCX (saturated)", cl, get(cpu, "load/ucx/tag-shm/8/1"), 1.0, "le")
	# bandwidth: the worst ratio over sizes >= 64 KiB, and over every size for UCX
	# and for fi_pingpong over clanq against shm
	wm = wr = wu = wl = wf = wx = -1
	for (s in sizes) {
		r = get(bw, "bw/clanq/rdma-write/" s "/0"); m = get(bw, "bw/memcpy/1-core/" s "/0")
		x = get(bw, "bw/rxe/ib_write_bw/" s "/0"); u = get(bw, "bw/ucx/tag-shm/" s "/0")
		p = get(bw, "bw/clanq/pio/" s "/0"); q = get(bw, "bw/clanq/rdma/" s "/0")
		if (s + 0 >= 65536 && r > 0 && m > 0 && (wm < 0 || r / m < wm)) { wm = r / m; wms = s }
		if (s + 0 >= 65536 && r > 0 && x > 0 && (wr < 0 || r / x < wr)) { wr = r / x; wrs = s }
		best = (p > q) ? p : q
		if (best > 0 && u > 0 && (wu < 0 || best / u < wu)) { wu = best / u; wus = s }
		d = get(bw, "bw/clanq/pio-default/" s "/0")
		fs = get(bw, "bw/libfabric/shm/" s "/0"); fm = get(bw, "bw/libfabric/clanq-msg/" s "/0")
		fr = get(bw, "bw/libfabric/clanq-rdm/" s "/0")
		if (fm > 0 && fs > 0 && (wf < 0 || fm / fs < wf)) { wf = fm / fs; wfs = s }
		if (fr > 0 && fs > 0 && (wx < 0 || fr / fs < wx)) { wx = fr / fs; wxs = s }
		if (s + 0 >= 65536 && d > 0 && r > 0 && (wl < 0 || d / r < wl)) { wl = d / r; wls = s }
	}
	row(sprintf("RDMA write bandwidth / memcpy, worst size >= 64 KiB (%s B)", wms), wm, 1, 0.8, "ge")
	row(sprintf("RDMA bandwidth / Soft-RoCE ib_write_bw, worst >= 64 KiB (%s B)", wrs), wr, 1, 2, "ge")
	row(sprintf("messaging bandwidth / UCX tag_bw, worst size (%s B)", wus), wu, 1, 1, "ge")
	row(sprintf("large messages, default rings / the engine, worst >= 64 KiB (%s B)", wls),
	    wl, 1, 0.8, "ge")
	row(sprintf("fi_pingpong bandwidth, clanq (msg) / shm, worst size (%s B)", wfs), wf, 1, 1, "ge")
	row(sprintf("  the same, clanq;ofi_rxm (rdm) / shm, worst size (%s B)", wxs), wx, 1, 1, "ge")
	if ("x" in maxsys)
		printf "%-62s %9.3f   %-8s %s\n", "system calls per message, worst clanq PIO polling mode",
		       maxsys["x"], "0", (maxsys["x"] < 0.05 ? "met" : "NOT met") " (" maxsys_at ")"
	rs = get(sys, "lat/clanq/rdma-poll/8/0")
	if (rs >= 0)
		printf "%-62s %9.3f   %-8s %s\n", "system calls per round trip, RDMA polling (doorbells)",
		       rs, "0", rs < 0.05 ? "met" : "NOT met (one doorbell per post: docs/decisions.md)"
}' "$csv" | tee "$out/summary.txt"

# ---- data files for gnuplot: one per series, "x y [y2]" ----
awk -F, -v dir="$data" '
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
	t = $col["test"]; s = $col["impl"] "_" $col["mode"]
	if (t == "bw" && $col["bw_mibs"] != "")
		print $col["bytes"], $col["bw_mibs"] > (dir "/bw_" s)
	if (t == "lat" && $col["t_typical"] != "")
		print $col["bytes"], $col["t_typical"] > (dir "/lat_" s)
	if (t == "idle" && $col["t_typical"] != "")
		print $col["param"], $col["t_typical"] > (dir "/idle_" s)
	if (t == "load" && $col["mpps"] != "")
		print $col["param"], $col["mpps"] * 1000, $col["cpu_us"] > (dir "/load_" s)
}' "$csv"

# plot lines for every series of a test: 'file' using 1:N with linespoints title "impl/mode"
series() {	# $1 test, $2 column
	local f first=1 t
	for f in "$data/$1"_*; do
		[ -e "$f" ] || continue
		t=$(basename "$f"); t=${t#"$1"_}; t=${t/_//}
		[ $first = 1 ] || printf ', '
		printf "'%s' using 1:%s with linespoints lw %s title '%s'" "$f" "$2" \
			"$([[ $t == clanq/* ]] && echo 3 || echo 1)" "$t"
		first=0
	done
}
plot() {	# $1 png, $2 title, $3 xlabel, $4 ylabel, $5 test, $6 column, $7 logscale
	local lines
	lines=$(series "$5" "$6")
	[ -n "$lines" ] || { echo "bench-report: no $5 rows: $1 not drawn" >&2; return 0; }
	gnuplot <<-EOF
		set terminal pngcairo size 1000,650 font ',11' noenhanced
		set output '$out/$1'
		$( [ "$3" = 'message size (bytes)' ] && echo "set format x '%.0b%B'" )
		set title "$2"
		set xlabel '$3'
		set ylabel '$4'
		set logscale $7
		set grid
		set key outside right
		plot $lines
	EOF
}
plot fig4-bw.png "Figure 4: bandwidth vs message size (one run, same kernel)" \
	'message size (bytes)' 'MiB/s' bw 2 'x 2'
plot lat.png "Round-trip time vs message size (typical, one run)" \
	'message size (bytes)' 'usec (round trip)' lat 2 'xy'
plot fig5-idle.png "Figure 5: round trip vs connections held by the server" \
	'connections held by the server' 'usec (round trip, typical)' idle 2 'xy'
plot fig6-load.png "Figure 6: server throughput vs offered load (clients, one in flight each)" \
	'clients' 'thousand messages/s' load 2 'x 2'
plot fig6-cpu.png "Figure 6 (cost): server CPU per message vs clients" \
	'clients' 'usec of server CPU per message' load 3 'x 2'
ls "$out"/*.png 2>/dev/null | sed 's/^/plot: /'
