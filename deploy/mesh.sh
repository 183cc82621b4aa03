#!/usr/bin/env bash
# A local grove mesh of N nodes on 127.0.0.1, for trying grove out and for
# tests and benchmarks by hand. Each node has its own state directory
# (DIR/node1 … DIR/nodeN), control socket (DIR/nodeK/grove.sock), port
# (BASE_PORT+K) and log (DIR/nodeK/node.log).
#
#   deploy/mesh.sh start N DIR   start N nodes and form one mesh by invite
#                                and vote (node1 founds it; every member
#                                votes yes on each add); returns once each
#                                joiner is a member linked to every member
#   deploy/mesh.sh stop DIR      SIGTERM every node and wait for clean exits
#   deploy/mesh.sh status DIR    each node's `grove mesh status`
#
# GROVE_BIN (default target/release/grove, built if missing) and BASE_PORT
# (default 4100) can be set; HTTP_NODE=K with HTTP_LISTEN=ADDR:PORT turns on
# node K's HTTP listener (`[http] listen`: /metrics and the web pages).
# Run `grove --state DIR/nodeK …` to talk to a node.
set -euo pipefail
cd "$(dirname "$0")/.."

grove=${GROVE_BIN:-$PWD/target/release/grove}
base_port=${BASE_PORT:-4100}
http_node=${HTTP_NODE:-} http_listen=${HTTP_LISTEN:-}
# grove reads GROVE_* variables as config keys and refuses unknown ones.
unset GROVE_BIN BASE_PORT HTTP_NODE HTTP_LISTEN

usage() { sed -n '2,/^set -euo/{/^#/p}' "$0" >&2; exit 2; }
g() { local dir=$1; shift; "$grove" --state "$dir" "$@"; }
json_get() { python3 -c "import json,sys; v=json.load(sys.stdin); print($1)"; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  local start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS - start > limit )); then echo "timed out waiting for $what" >&2; return 1; fi
    sleep 0.2
  done
}

start_node() { # start_node DIR K
  local dir=$1/node$2
  mkdir -p "$dir"
  local http=()
  [ "$2" = "$http_node" ] && [ -n "$http_listen" ] && http=(GROVE_HTTP__LISTEN="$http_listen")
  env "${http[@]}" GROVE_NODE__NAME="node$2" setsid "$grove" --state "$dir" node run \
    --listen "/ip4/127.0.0.1/tcp/$((base_port + $2))" >"$dir/node.log" 2>&1 &
  echo $! >"$dir/pid"
  wait_for 60 "node$2 to start" g "$dir" node status
}

# Votes yes on the open add of $2 from every member listed in $3.
vote_add() { # vote_add DIR JOINER_PEER MEMBERS...
  local root=$1 joiner=$2 m; shift 2
  for m in "$@"; do
    local dir=$root/node$m id=""
    for _ in $(seq 1 300); do
      id=$(g "$dir" --json mesh proposals | json_get \
        "next((p['id'] for p in v['proposals'] if p['kind']=='add' and p['target']=='$joiner'), '')")
      [ -n "$id" ] && break
      # The add may already have passed with the votes cast so far.
      if g "$dir" --json mesh status | json_get "'$joiner' in [m['peer_id'] for m in v['members']]" | grep -q True; then
        id=passed; break
      fi
      sleep 0.2
    done
    [ "$id" = passed ] && return 0
    [ -n "$id" ] || { echo "node$m never saw the add of $joiner" >&2; return 1; }
    g "$dir" mesh vote "$id" yes >/dev/null 2>&1 || true
  done
}

# Whether peer $3 sees peer $4 as a member over a connection that carries
# the members-only protocols (`admitted` in `peers --json`).
admits() { # admits DIR_OF_VIEWER PEER
  g "$1" --json peers | json_get \
    "any(p['peer_id']=='$2' and p['member'] and p['connected'] and p.get('admitted') for p in v['peers'])" \
    | grep -q True
}

# node$2 is a member as the demo and the tests mean it: `state: member` on
# it, in every earlier member's roster, and linked to each of them with
# the members-only protocols open both ways (what gossip and search need).
member_ready() { # member_ready ROOT K
  local root=$1 k=$2 m me them
  g "$root/node$k" --json mesh status | json_get "v['state']" | grep -qx member || return 1
  me=$(g "$root/node$k" --json identity show | json_get "v['peer_id']")
  for m in $(seq 1 $((k - 1))); do
    them=$(g "$root/node$m" --json identity show | json_get "v['peer_id']")
    g "$root/node$m" --json mesh status \
      | json_get "'$me' in [x['peer_id'] for x in v['members']]" | grep -q True || return 1
    admits "$root/node$m" "$me" || return 1
    admits "$root/node$k" "$them" || return 1
  done
}

cmd=${1:-}
case "$cmd" in
  start)
    [ $# -eq 3 ] || usage
    n=$2 root=$3
    [ "$n" -ge 1 ] || usage
    [ -x "$grove" ] || cargo build --release --quiet --bin grove
    mkdir -p "$root"
    for k in $(seq 1 "$n"); do start_node "$root" "$k"; done
    g "$root/node1" mesh init --name local-mesh >/dev/null
    for k in $(seq 2 "$n"); do
      invite=$(g "$root/node1" mesh invite --note "node$k" 2>/dev/null)
      joiner=$(g "$root/node$k" --json identity show | json_get "v['peer_id']")
      g "$root/node$k" mesh join "$invite" >/dev/null
      # node1's invite is its yes; the other members vote.
      members=$(seq 2 $((k - 1)))
      # shellcheck disable=SC2086
      vote_add "$root" "$joiner" $members
      wait_for 60 "node$k to be a member linked to every member" member_ready "$root" "$k"
    done
    echo "mesh of $n nodes running under $root (ports $((base_port + 1))-$((base_port + n)))"
    ;;
  stop)
    [ $# -eq 2 ] || usage
    root=$2
    for pidfile in "$root"/node*/pid; do
      [ -f "$pidfile" ] || continue
      pid=$(cat "$pidfile")
      kill -TERM "$pid" 2>/dev/null || true
    done
    for pidfile in "$root"/node*/pid; do
      [ -f "$pidfile" ] || continue
      pid=$(cat "$pidfile")
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "node $(dirname "$pidfile") did not stop within 10 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
      rm -f "$pidfile"
    done
    echo "stopped the mesh under $root"
    ;;
  status)
    [ $# -eq 2 ] || usage
    for dir in "$2"/node*; do echo "== $(basename "$dir")"; g "$dir" mesh status || true; done
    ;;
  *) usage ;;
esac
