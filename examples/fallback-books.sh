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
# dictd's .dict.dz is gzip-compatible text. Each text is framed in the
# layout grove reads titles from (a header with Title and Author, then start
# and end lines; docs/ARCHITECTURE.md, gutenberg-v1), so the moot names its
# books; the texts themselves are unchanged.
frame() { # frame TITLE AUTHOR DICT_DZ OUT
  {
    printf 'Title: %s\nAuthor: %s\n\n' "$1" "$2"
    printf '*** START OF THE PROJECT GUTENBERG EBOOK %s ***\n\n' "$1"
    gzip -dc "$3"
    printf '\n*** END OF THE PROJECT GUTENBERG EBOOK %s ***\n' "$1"
  } > "$4"
}
frame "The Devil's Dictionary" "Ambrose Bierce" \
  "$work/x/usr/share/dictd/devil.dict.dz" "$dest/devils-dictionary.txt"
frame "The Jargon File" "Eric S. Raymond (editor)" \
  "$work/x/usr/share/dictd/jargon.dict.dz" "$dest/jargon-file.txt"
