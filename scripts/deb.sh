#!/bin/bash
# make deb: the Debian packages (debian/) from a copy of the tracked tree in
# build/deb/src/clanq-<version>/, so the checkout's own build/ and any
# untracked file stay out of them. The .deb, .changes and .buildinfo files
# end up in build/deb/. Unsigned, binary only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

version=$(make --no-print-directory -s print-version)
out=$root/build/deb
src=$out/src/clanq-$version

rm -rf "$out"
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# tracked files as they are in the work tree (uncommitted edits included)
	git ls-files -z | while IFS= read -r -d '' f; do
		[ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"
	done | tar -cf - --null -T - | tar -xf - -C "$src"
else
	tar -cf - --exclude=./build --exclude=./.git . | tar -xf - -C "$src"
fi

echo ">> dpkg-buildpackage in $src" >&2
(cd "$src" && dpkg-buildpackage -us -uc -b) > "$out/build.log" 2>&1 || {
	tail -n 30 "$out/build.log" >&2
	echo "deb: dpkg-buildpackage failed (log: $out/build.log)" >&2
	# dh_makeshlibs -- -c4: the library's exports differ from the record
	if grep -q '^dpkg-gensymbols: warning: .*symbols' "$out/build.log"; then
		echo "deb: libclanq.so.2's symbols are not those of" \
			"debian/libclanq2.symbols (+ new, - gone: see the diff in the log);" \
			"a new function is added there, a removed one is an ABI break" >&2
	fi
	exit 1
}
mv "$out"/src/*.deb "$out"/src/*.changes "$out"/src/*.buildinfo "$out"/
ls -1 "$out"/*.deb
