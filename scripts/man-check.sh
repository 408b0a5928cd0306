#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# man-check.sh: lint the man pages in docs/man/.
#
# For every page docs/man/*.[1-8]:
#  - a .so alias (one line ".so manN/page.N") must name a page that
#    exists here and is not itself an alias;
#  - any other page must format with groff -man -ww (all warnings) without
#    a single diagnostic, lexgrog(1) must parse its NAME section, and no
#    line may end in blanks.
# One line per page on stdout: "PASS man/<page>" or "FAIL man/<page>: why";
# with CLANQ_RESULTS set, the same lines are appended to that file as
# "PASS lint/man/<page>" / "FAIL lint/man/<page>: why". Exit status 1 if
# any page failed (or there is none), 2 if a tool is missing.
#
# Needs groff (Debian package groff-base) and lexgrog (package man-db).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mandir=${MANCHECK_DIR:-$here/docs/man}

for tool in groff lexgrog; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "man-check: $tool not found (install groff-base and man-db)" >&2
		exit 2
	fi
done

failed=0
checked=0

report() {	# report PASS|FAIL page [reason]
	local verdict=$1 page=$2 why=${3:-}
	local line="$verdict man/$page${why:+: $why}"
	local rline="$verdict lint/man/$page${why:+: $why}"

	echo "$line"
	if [ -n "${CLANQ_RESULTS:-}" ]; then
		echo "$rline" >>"$CLANQ_RESULTS"
	fi
	if [ "$verdict" = FAIL ]; then
		failed=$((failed + 1))
	fi
}

is_alias() {	# a page whose only content is one .so request
	[ "$(grep -cv '^[[:space:]]*$' "$1")" -eq 1 ] && grep -q '^\.so ' "$1"
}

check_alias() {
	local f=$1 page target sect
	page=$(basename "$f")
	target=$(sed -n 's/^\.so[[:space:]]\{1,\}//p' "$f")
	# the request is relative to the top of a man tree: manN/page.N
	if ! [[ $target =~ ^man([1-8])/[^/[:space:]]+\.([1-8])$ ]]; then
		report FAIL "$page" ".so target '$target' is not manN/page.N"
		return
	fi
	if [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]; then
		report FAIL "$page" ".so target '$target': directory and suffix differ"
		return
	fi
	sect=$(basename "$target")
	if [ ! -f "$mandir/$sect" ]; then
		report FAIL "$page" ".so target '$target' does not exist"
	elif is_alias "$mandir/$sect"; then
		report FAIL "$page" ".so target '$target' is itself an alias"
	else
		report PASS "$page"
	fi
}

check_page() {
	local f=$1 page out name
	page=$(basename "$f")
	out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$f" 2>&1) || true
	if [ -n "$out" ]; then
		report FAIL "$page" "groff: $(printf '%s' "$out" | head -n 1)"
		return
	fi
	if ! name=$(lexgrog "$f" 2>&1) || [[ $name == *"parse failed"* ]]; then
		report FAIL "$page" "lexgrog cannot parse the NAME section"
		return
	fi
	if grep -qn '[[:blank:]]$' "$f"; then
		report FAIL "$page" "trailing blanks on line $(grep -n '[[:blank:]]$' "$f" | head -n 1 | cut -d: -f1)"
		return
	fi
	report PASS "$page"
}

shopt -s nullglob
for f in "$mandir"/*.[1-8]; do
	checked=$((checked + 1))
	if is_alias "$f"; then
		check_alias "$f"
	else
		check_page "$f"
	fi
done

if [ "$checked" -eq 0 ]; then
	echo "man-check: no pages in $mandir" >&2
	exit 1
fi
[ "$failed" -eq 0 ]
