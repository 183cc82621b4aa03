"""A foreign adversary against a grove node, written on py-libp2p 0.8.1.

grove's own code wrote none of this: it is a second libp2p implementation
(Noise + Yamux over TCP, identify, gossipsub) that speaks grove's framing
(one unsigned-varint length, then the bytes; src/net/codec.rs) and builds
grove's protobuf messages by hand (proto/*.proto). tests/admission.rs and
`grove-bench admission` run it.

Every subcommand is bounded in count and time, exits by itself and prints
one JSON object of results on stdout (logs go to stderr):

  flood      N connections from fresh identities, held open
  stall      C connections x S streams sending only a length prefix
  graft      a non-member subscribing and GRAFTing on grove's topics
  joinflood  N join requests carrying invites the sender signed itself
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

import multiaddr
import trio

import libp2p
import libp2p.identity.identify.identify as identify_mod
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr

# grove announces identify protocol version "/grove/1" (src/net/protocol.rs);
# the adversary announces the same, as a grove node would.
identify_mod.PROTOCOL_VERSION = "/grove/1"

JOIN = TProtocol("/grove/join/1")
TURN = TProtocol("/grove/turn/1")

# Signature tags of src/mesh/codec.rs and src/identity.rs.
TAG_INVITE = b"grove-mesh/v1/invite\0"
TAG_JOIN = b"grove-mesh/v1/join\0"
TAG_X25519_BINDING = b"grove-mesh/v1/x25519-binding\0"

T0 = time.monotonic()


def now() -> float:
    """Seconds since the program started."""
    return round(time.monotonic() - T0, 3)


def log(msg: str) -> None:
    print(f"[adversary {now():8.3f}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- encoding


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(field: int, data: bytes) -> bytes:
    """A length-delimited field; empty values are omitted (proto3 canonical)."""
    if not data:
        return b""
    return varint(field << 3 | 2) + varint(len(data)) + data


def pb_int(field: int, value: int) -> bytes:
    if value == 0:
        return b""
    return varint(field << 3) + varint(value & (2**64 - 1))


def pb_fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """Top-level fields of a protobuf message: (number, wire type, value)."""
    out = []
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(data, i)
            out.append((field, wt, v))
        elif wt == 2:
            n, i = read_varint(data, i)
            out.append((field, wt, data[i : i + n]))
            i += n
        else:
            raise ValueError(f"wire type {wt}")
    return out


def read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def signed(body: bytes, key_pair, tag: bytes) -> bytes:
    """grove.mesh.Signed {body, signer (Ed25519 key), signature over tag||body}."""
    signer = key_pair.public_key.to_bytes()
    signature = key_pair.private_key.sign(tag + body)
    return pb_bytes(1, body) + pb_bytes(2, signer) + pb_bytes(3, signature)


def self_signed_join_call(key_pair, mesh_id: bytes, serial: int) -> bytes:
    """A JoinCall carrying a JoinRequest whose invite the sender signed
    itself (inviter = the sender): well formed, every signature valid, and
    worthless, because the sender is no member of the mesh."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    peer_id = ID.from_pubkey(key_pair.public_key).to_bytes()
    ms = int(time.time() * 1000)
    invite = (
        pb_bytes(1, mesh_id)
        + pb_bytes(2, "forged".encode())
        + pb_bytes(3, peer_id)
        + pb_int(5, ms)
        + pb_int(6, ms + 3_600_000)
        + pb_bytes(7, os.urandom(8) + serial.to_bytes(8, "big"))
    )
    x25519 = (
        X25519PrivateKey.generate()
        .public_key()
        .public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    binding = key_pair.private_key.sign(TAG_X25519_BINDING + x25519)
    request = (
        pb_bytes(1, mesh_id)
        + pb_bytes(2, signed(invite, key_pair, TAG_INVITE))
        + pb_bytes(3, key_pair.public_key.to_bytes())
        + pb_bytes(4, x25519)
        + pb_bytes(5, binding)
        + pb_bytes(6, f"flood-{serial}".encode())
        + pb_int(7, ms)
    )
    return pb_bytes(1, signed(request, key_pair, TAG_JOIN))


async def read_frame(stream, limit: int = 16 << 20) -> bytes:
    """One grove frame from `stream`: varint length, then the bytes."""
    buf = b""
    n = shift = 0
    while True:
        b = await stream.read(1)
        if not b:
            raise EOFError("stream closed before a frame")
        n |= (b[0] & 0x7F) << shift
        shift += 7
        if not b[0] & 0x80:
            break
    if n > limit:
        raise ValueError(f"frame of {n} bytes")
    while len(buf) < n:
        chunk = await stream.read(n - len(buf))
        if not chunk:
            raise EOFError("stream closed inside a frame")
        buf += chunk
    return buf


# ---------------------------------------------------------------- hosts


def new_host(key_pair=None):
    return libp2p.new_host(key_pair=key_pair or create_new_key_pair())


def target_info(addr: str):
    return info_from_p2p_addr(multiaddr.Multiaddr(addr))


def running(host):
    """`host` running (as an async context, entered and left by one task).
    It listens on loopback only: it is never dialled, but py-libp2p runs its
    swarm through a listener."""
    return host.run(listen_addrs=[multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")])


def finish(result: dict) -> None:
    """Prints the result and exits at once: closing hundreds of py-libp2p
    hosts one by one takes longer than the test itself."""
    print(json.dumps(result), flush=True)
    os._exit(0)


def connected(host, peer) -> bool:
    try:
        return bool(host.get_network().get_connections(peer))
    except Exception:
        return peer in host.get_network().connections


async def watch_stream_closed(stream, deadline: float) -> float | None:
    """Reads `stream` until the node closes or resets it; the time it did,
    or None when it stayed open until `deadline` (monotonic)."""
    with trio.move_on_after(max(0.0, deadline - time.monotonic())):
        try:
            while True:
                data = await stream.read(65536)
                if not data:
                    return now()
        except Exception:
            return now()
    return None


# ---------------------------------------------------------------- flood


async def flood(args) -> dict:
    """N connections from fresh identities, held for `hold` seconds. With
    --turn each opens a /grove/turn/1 stream and keeps it open (sending
    nothing). With --redial a connection the node closed is replaced by a
    new one from a fresh identity (at most --max-dials in all)."""
    info = target_info(args.target)
    started = time.monotonic()
    end = started + args.hold
    result = {
        "command": "flood",
        "conns": args.conns,
        "connected": 0,  # connections established, re-dials included
        "failed": 0,
        "closed_by_node": 0,
        "closed_at": [],
        "turn_streams": 0,
        "turn_streams_refused": 0,
        "dials": 0,
        "first_error": None,
        "established_by_s": None,
        "open_peak": 0,
        "open_at_end": 0,
    }
    open_now = [0]
    attempted: set[int] = set()

    async def one(slot: int) -> None:
        while time.monotonic() < end and result["dials"] < args.max_dials:
            result["dials"] += 1
            host = new_host()
            async with running(host):
                try:
                    with trio.fail_after(max(0.1, min(20.0, end - time.monotonic()))):
                        await host.connect(info)
                        result["connected"] += 1
                        open_now[0] += 1
                        result["open_peak"] = max(result["open_peak"], open_now[0])
                        if args.turn:
                            try:
                                await host.new_stream(info.peer_id, [TURN])
                                result["turn_streams"] += 1
                            except Exception:
                                result["turn_streams_refused"] += 1
                except Exception as e:
                    attempted.add(slot)
                    result["failed"] += 1
                    if result["first_error"] is None:
                        result["first_error"] = f"{type(e).__name__}: {e}"[:300]
                    if not args.redial:
                        await trio.sleep_forever()
                    await trio.sleep(1.0)
                    continue
                attempted.add(slot)
                # Held: poll until the node closes it or the hold ends.
                while time.monotonic() < end and connected(host, info.peer_id):
                    await trio.sleep(0.25)
                if time.monotonic() >= end:
                    await trio.sleep_forever()
                open_now[0] -= 1
                result["closed_by_node"] += 1
                result["closed_at"].append(now())
                if not args.redial:
                    await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        for slot in range(args.conns):
            nursery.start_soon(one, slot)
            # Spread the handshakes a little: py-libp2p is slow at many at
            # once, and the point is holding, not racing.
            await trio.sleep(args.spacing)
        log(f"flood: {args.conns} started")
        in_place = False
        all_started = time.monotonic()
        while time.monotonic() < end:
            # In place once every slot has dialled once (connected or
            # refused), or 15 s after the last one started.
            settled = len(attempted) >= args.conns or time.monotonic() - all_started > 15
            if not in_place and settled:
                in_place = True
                log(f"flood: in place, {open_now[0]} connections open")
            if result["established_by_s"] is None and open_now[0] >= args.conns:
                result["established_by_s"] = now()
                log(f"flood: all {args.conns} connected")
            await trio.sleep(0.25)
        result["open_at_end"] = open_now[0]
        finish(result)


# ---------------------------------------------------------------- stall


async def stall(args) -> dict:
    """C connections x S streams on `proto`, each sending only the varint
    length prefix `prefix` and then nothing; when did the node close each?"""
    info = target_info(args.target)
    end = time.monotonic() + args.hold
    streams_opened = 0
    closed_at: list[float] = []
    never_closed = 0
    open_failed = 0
    first_error = None
    opened_by = [None]

    async def one_stream(host) -> None:
        nonlocal streams_opened, never_closed, open_failed, first_error
        try:
            with trio.fail_after(20):
                stream = await host.new_stream(info.peer_id, [TProtocol(args.proto)])
                await stream.write(varint(args.prefix))
            streams_opened += 1
        except Exception as e:
            open_failed += 1
            first_error = first_error or f"{type(e).__name__}: {e}"[:300]
            return
        at = await watch_stream_closed(stream, end)
        if at is None:
            never_closed += 1
        else:
            closed_at.append(at)

    key_pairs = []
    if args.key_file:
        # A member's own key (the 32-byte Ed25519 seed of a grove identity,
        # identity/ed25519.key): the stall then comes from inside the mesh,
        # past any members-only gate, to the frame reader itself.
        with open(args.key_file, "rb") as f:
            seed = f.read()
        key_pairs = [create_new_key_pair(seed)]

    async def one_conn() -> None:
        nonlocal open_failed, first_error
        host = new_host(key_pairs.pop() if key_pairs else None)
        async with running(host):
            try:
                with trio.fail_after(20):
                    await host.connect(info)
            except Exception as e:
                open_failed += args.streams
                first_error = first_error or f"{type(e).__name__}: {e}"[:300]
                await trio.sleep_forever()
            async with trio.open_nursery() as streams:
                for _ in range(args.streams):
                    streams.start_soon(one_stream, host)
                    await trio.sleep(0.002)
            await trio.sleep_forever()

    async def warm() -> int:
        """Whole frames of the stall's size first, answered and freed: the
        node's allocator then serves later buffers of that size from its
        arenas (zeroed, so resident) rather than from fresh untouched
        mmap pages, as it would on a node that has been serving a while."""
        answered = 0
        host = new_host()

        async def frame() -> None:
            nonlocal answered
            try:
                with trio.fail_after(30):
                    stream = await host.new_stream(info.peer_id, [TProtocol(args.proto)])
                    await stream.write(varint(args.prefix) + b"\0" * args.prefix)
                    await read_frame(stream)
                    answered += 1
            except Exception as e:
                log(f"warm-up frame: {type(e).__name__}: {e}")

        async with running(host):
            with trio.fail_after(20):
                await host.connect(info)
            # All at once, so that many such buffers are live together.
            async with trio.open_nursery() as frames:
                for _ in range(args.warm):
                    frames.start_soon(frame)
        return answered

    warmed = await warm() if args.warm else 0
    target = args.conns * args.streams
    async with trio.open_nursery() as nursery:
        for _ in range(args.conns):
            nursery.start_soon(one_conn)
            await trio.sleep(0.05)
        while time.monotonic() < end:
            if opened_by[0] is None and streams_opened + open_failed >= target:
                opened_by[0] = now()
                log(f"stall: {streams_opened} streams sent their prefix")
            if closed_at and len(closed_at) + never_closed + open_failed >= target:
                break
            await trio.sleep(0.25)
        # Streams still open at the end of the hold were never closed.
        never_closed = max(never_closed, streams_opened - len(closed_at))
        closed_at.sort()
        finish(
            {
                "command": "stall",
                "proto": args.proto,
                "prefix": args.prefix,
                "warm_frames_answered": warmed,
                "requested": target,
                "streams_opened": streams_opened,
                "open_failed": open_failed,
                "first_error": first_error,
                "opened_by_s": opened_by[0],
                "closed": len(closed_at),
                "never_closed": never_closed,
                "first_closed_at": closed_at[0] if closed_at else None,
                "last_closed_at": closed_at[-1] if closed_at else None,
                "hold": args.hold,
            }
        )


# ---------------------------------------------------------------- graft


async def graft(args) -> dict:
    """A non-member subscribes to grove's topics and GRAFTs (py-libp2p's
    gossipsub grafts the subscribed peers it knows at each heartbeat);
    counts what the node sends it on those topics."""
    from libp2p.pubsub.gossipsub import GossipSub, PROTOCOL_ID_V11
    from libp2p.pubsub.pubsub import Pubsub
    from libp2p.tools.anyio_service import background_trio_service

    info = target_info(args.target)
    topics = [t for t in args.topics.split(",") if t]
    counts = {
        "messages": 0,
        "messages_by_topic": {t: 0 for t in topics},
        "ihave": 0,
        "graft_from_node": 0,
        "prune_from_node": 0,
    }
    router = GossipSub(
        protocols=[PROTOCOL_ID_V11],
        degree=4,
        degree_low=1,
        degree_high=8,
        heartbeat_interval=1,
        heartbeat_initial_delay=0.5,
    )
    orig_graft, orig_prune, orig_ihave = (
        router.handle_graft,
        router.handle_prune,
        router.handle_ihave,
    )

    async def on_graft(msg, sender):
        counts["graft_from_node"] += 1
        return await orig_graft(msg, sender)

    async def on_prune(msg, sender):
        counts["prune_from_node"] += 1
        return await orig_prune(msg, sender)

    async def on_ihave(msg, sender):
        counts["ihave"] += 1
        return await orig_ihave(msg, sender)

    router.handle_graft, router.handle_prune, router.handle_ihave = (
        on_graft,
        on_prune,
        on_ihave,
    )
    host = new_host()
    # Count every published message the node forwards, before validation
    # (a message that fails py-libp2p's checks still reached us).
    pubsub = Pubsub(host, router, strict_signing=False)
    orig_push = pubsub.push_msg

    async def on_push(forwarder, msg):
        counts["messages"] += 1
        for t in msg.topicIDs:
            if t in counts["messages_by_topic"]:
                counts["messages_by_topic"][t] += 1
        return await orig_push(forwarder, msg)

    pubsub.push_msg = on_push
    async with running(host), background_trio_service(pubsub), background_trio_service(
        router
    ):
        await pubsub.wait_until_ready()
        for t in topics:
            await pubsub.subscribe(t)
        with trio.fail_after(20):
            await host.connect(info)
        connected_at = now()
        end = time.monotonic() + args.listen
        grafted_seen = False
        closed_at = None
        while time.monotonic() < end:
            await trio.sleep(0.5)
            in_mesh = any(info.peer_id in router.mesh.get(t, set()) for t in topics)
            grafted_seen = grafted_seen or in_mesh
            if closed_at is None and not connected(host, info.peer_id):
                closed_at = now()
        finish({
            "command": "graft",
            "topics": topics,
            "connected_at": connected_at,
            "listen": args.listen,
            "node_in_our_mesh": grafted_seen,
            "closed_by_node_at": closed_at,
            **counts,
        })


# ---------------------------------------------------------------- joinflood


async def joinflood(args) -> dict:
    """N join calls on /grove/join/1 from `senders` fresh identities, at
    most `parallel` in flight, each a new stream with a self-signed invite."""
    info = target_info(args.target)
    mesh_id = bytes.fromhex(args.mesh_id) if args.mesh_id else os.urandom(16)
    end = time.monotonic() + args.max_secs
    answers: dict[str, int] = {}
    latencies: list[float] = []
    errors = 0
    first_error = None
    sent = 0

    async def worker(host, key_pair, quota: int) -> None:
        nonlocal errors, first_error, sent
        for _ in range(quota):
            if time.monotonic() >= end or sent >= args.count:
                return
            call = self_signed_join_call(key_pair, mesh_id, sent)
            sent += 1
            t = time.monotonic()
            try:
                with trio.fail_after(30):
                    stream = await host.new_stream(info.peer_id, [JOIN])
                    await stream.write(varint(len(call)) + call)
                    answer = await read_frame(stream)
                    await stream.close()
                latencies.append(time.monotonic() - t)
                kind = "unparsed"
                for field, _, value in pb_fields(answer):
                    if field == 1:
                        kind = "pending"
                    elif field == 2:
                        kind = "welcome"
                    elif field == 3:
                        kind = "refused: " + value.decode(errors="replace")[:80]
                answers[kind] = answers.get(kind, 0) + 1
            except Exception as e:
                errors += 1
                first_error = first_error or f"{type(e).__name__}: {e}"[:300]
                await trio.sleep(0.05)

    async def sender(key_pair, quota: int, ready) -> None:
        host = new_host(key_pair)
        async with running(host):
            with trio.fail_after(20):
                await host.connect(info)
            ready.append(1)
            async with trio.open_nursery() as workers:
                for _ in range(args.parallel):
                    workers.start_soon(worker, host, key_pair, quota)
            done.append(1)
            await trio.sleep_forever()

    done: list[int] = []
    ready: list[int] = []
    per_worker = -(-args.count // (args.senders * args.parallel))
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        for _ in range(args.senders):
            nursery.start_soon(sender, create_new_key_pair(), per_worker, ready)
        while time.monotonic() < end and len(done) < args.senders:
            await trio.sleep(0.1)
        elapsed = time.monotonic() - started
        latencies.sort()

        def pct(p: float):
            if not latencies:
                return None
            return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 4)

        finish(
            {
                "command": "joinflood",
                "count": args.count,
                "senders_connected": len(ready),
                "sent": sent,
                "answered": len(latencies),
                "errors": errors,
                "first_error": first_error,
                "answers": answers,
                "elapsed_s": round(elapsed, 3),
                "rate_per_s": round(len(latencies) / elapsed, 1) if elapsed else None,
                "latency_p50_s": pct(0.5),
                "latency_p99_s": pct(0.99),
            }
        )


def main() -> None:
    logging.basicConfig(level=logging.CRITICAL)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("flood")
    f.add_argument("--target", required=True)
    f.add_argument("--conns", type=int, required=True)
    f.add_argument("--hold", type=float, required=True)
    f.add_argument("--turn", action="store_true")
    f.add_argument("--redial", action="store_true")
    f.add_argument("--max-dials", type=int, default=5000)
    f.add_argument("--spacing", type=float, default=0.01)
    s = sub.add_parser("stall")
    s.add_argument("--target", required=True)
    s.add_argument("--conns", type=int, required=True)
    s.add_argument("--streams", type=int, required=True)
    s.add_argument("--proto", default="/grove/search/1")
    s.add_argument("--prefix", type=int, default=262144)
    s.add_argument("--hold", type=float, required=True)
    s.add_argument("--warm", type=int, default=4)
    s.add_argument("--key-file", default="")
    g = sub.add_parser("graft")
    g.add_argument("--target", required=True)
    g.add_argument("--topics", required=True)
    g.add_argument("--listen", type=float, required=True)
    j = sub.add_parser("joinflood")
    j.add_argument("--target", required=True)
    j.add_argument("--count", type=int, required=True)
    j.add_argument("--mesh-id", default="")
    j.add_argument("--senders", type=int, default=4)
    j.add_argument("--parallel", type=int, default=8)
    j.add_argument("--max-secs", type=float, default=120)
    args = p.parse_args()
    # A hard stop whatever happens: hold/listen plus time to set up.
    budget = 60 + getattr(args, "hold", 0) + getattr(args, "listen", 0)
    budget += getattr(args, "max_secs", 0)
    run = {"flood": flood, "stall": stall, "graft": graft, "joinflood": joinflood}
    async def bounded() -> None:
        with trio.move_on_after(budget):
            await run[args.command](args)
        print(json.dumps({"command": args.command, "error": "time budget exceeded"}))
        os._exit(2)

    trio.run(bounded)


if __name__ == "__main__":
    main()
