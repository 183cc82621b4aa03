#!/usr/bin/env bash
# The demo's books where no corpus is at hand: Debian's dict-devil (Ambrose
# Bierce's The Devil's Dictionary) and dict-jargon (the Jargon File), both
# public domain, fetched with `apt-get download` (no root needed) and
# unpacked to plain text in DEST:
#
#   examples/fallback-books.sh DEST
#
# writes DEST/devils-dictionary.txt and DEST/jargon-file.txt. examples/demo.sh
# and the text judge's test in tests/cli.rs both use it.
set -euo pipefail
dest=${1:?usage: examples/fallback-books.sh DEST}
mkdir -p "$dest"
work=$(mktemp -d -t grove-fallback-books.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download dict-devil dict-jargon >/dev/null 2>&1) || {
  echo "could not download dict-devil and dict-jargon with apt-get" >&2; exit 1; }
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
# dictd's .dict.dz is gzip-compatible text.
gzip -dc "$work/x/usr/share/dictd/devil.dict.dz" > "$dest/devils-dictionary.txt"
gzip -dc "$work/x/usr/share/dictd/jargon.dict.dz" > "$dest/jargon-file.txt"
