"""A Dafka node that behaves, where the harness meets it, as zeromq/dafka's programs do
(docs/real-implementations.md) — built from the reference nodes, changed only there:

* it binds a port of its own choosing (zeromq/dafka binds ``tcp://*:*``) and announces it in
  its beacons; it is told only the tower's endpoints (``--bind`` gives it one instead);
* ``--empty-host``: its beacons carry an empty host (zeromq/dafka's default ``beacon/address``),
  for the tower to fill in the connection's address;
* ``--two-nodes`` (store): the store is two nodes, each with its own address, XPUB and beacon,
  as zeromq/dafka's is: a writer (takes RECORDs, HEADs and the DIRECT-RECORDs that answer its
  FETCHes; sends ACKs and FETCHes) and a reader (answers FETCH, GET-HEADS and CONSUMER-HELLO;
  greets consumers with STORE-HELLO under its own address), sharing one database;
* ``--subscribe-after-ms`` (consumer): it subscribes to its topics that long after it started,
  as zeromq/dafka's console consumer does (one second);
* ``--data-dir`` (store): its database lives in a file there and survives the process being
  killed and started again, as zeromq/dafka's LevelDB does (without it: in memory);
* ``--towers`` takes ``xsub,xpub`` pairs separated by ``;`` (zeromq/dafka's ``tower/endpoints``
  lists several); ``--advertise`` announces another endpoint than the one it binds (a chaos
  proxy's, when one stands in front of it).

    python tests/standins/dafka_node.py store --towers tcp://127.0.0.1:5556,tcp://127.0.0.1:5557 --two-nodes

It prints ``READY`` once its sockets are bound and runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from typing import Any

from harness.live.filestore import FileStore
from harness.live.runtime import LiveRuntime
from harness.node import Action, DurableStore, NodeContext, Send
from harness.protocols.codec import Message
from harness.protocols.dafka import subscription
from reference_nodes.dafka.common import TOWER_PUB, new_address, raw
from reference_nodes.dafka.consumer import Consumer
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import Store

SHARED_DB: DurableStore = DurableStore()  # the two nodes of a --two-nodes store share it, as zeromq/dafka's share LevelDB
READER_ASKS = ("FETCH", "GET-HEADS", "CONSUMER-HELLO")


def own_port() -> int:
    """A port this program picks (the kernel's choice), not one the harness gave it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def empty_host(cls: type) -> type:
    """``cls`` beaconing ``["B", address, "", port]``."""

    class EmptyHost(cls):  # type: ignore[misc, valid-type]
        def beacon(self) -> Send:
            frames = [b"B", raw(self.address), b"", str(self.port).encode()]
            return Send(TOWER_PUB, frames, "BEACON", {"topic": None, "seq": None})

    EmptyHost.__name__ = f"EmptyHost{cls.__name__}"
    return EmptyHost


class DiskStore(Store):
    """A one-node store whose database is SHARED_DB (a file with --data-dir)."""

    def open_db(self, ctx: NodeContext) -> DurableStore:
        return SHARED_DB


class WriterStore(Store):
    """The writer half: records in, ACKs and FETCHes out, no answers, no STORE-HELLO."""

    def open_db(self, ctx: NodeContext) -> DurableStore:
        return SHARED_DB

    def peer_subscriptions(self) -> list[bytes]:
        return [subscription("RECORD"), subscription("HEAD"), subscription("DIRECT-RECORD", self.address)]

    def on_subscription(self, sub: Any, now: int) -> list[Action]:
        return []


class ReaderStore(Store):
    """The reader half: its own address; answers from what the writer stored."""

    def open_db(self, ctx: NodeContext) -> DurableStore:
        return SHARED_DB

    def make_address(self) -> str:
        return new_address(self.rng)  # not the writer's, which the database keeps

    def peer_subscriptions(self) -> list[bytes]:
        return [subscription("FETCH"), subscription("GET-HEADS"), subscription("CONSUMER-HELLO", self.address)]

    def on_message(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        if msg.name not in READER_ASKS or msg["address"] == SHARED_DB.get("address"):
            return []  # not its business, or its own writer asking
        self.parts, self._next_idx = {}, 0
        self._load()  # what the writer stored since
        return super().on_message(msg, frames, now)


def nodes(args: argparse.Namespace) -> list[tuple[str, Any, dict[str, Any]]]:
    towers = [pair.split(",") for pair in args.towers.split(";") if pair]
    common = {"dialect": args.dialect, "towers": towers, "beacon_ms": args.beacon_ms,
              "peer_expiry_ms": args.peer_expiry_ms}
    wrap = empty_host if args.empty_host else (lambda c: c)
    if args.role == "producer":
        cfg = {"topic": args.topic, "records": args.records, "delay_ms": args.delay_ms,
               "interval_ms": args.interval_ms, "head_ms": args.head_ms}
        return [("producer", wrap(Producer), {**common, **cfg})]
    if args.role == "consumer":
        topics = [] if args.subscribe_after_ms else [t for t in args.topics.split(",") if t]
        return [("consumer", wrap(Consumer), {**common, "topics": topics, "offset_reset": args.offset_reset,
                                              "fetch_retry_ms": args.fetch_retry_ms})]
    common["fetch_retry_ms"] = args.fetch_retry_ms
    if args.two_nodes:
        return [("store-writer", wrap(WriterStore), dict(common)), ("store-reader", wrap(ReaderStore), dict(common))]
    return [("store", wrap(DiskStore), dict(common))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("producer", "store", "consumer"))
    ap.add_argument("--towers", required=True, help="each tower's XSUB,XPUB endpoints, ';' between towers")
    ap.add_argument("--dialect", default="dafka:zproto")
    ap.add_argument("--beacon-ms", type=int, default=200)
    ap.add_argument("--peer-expiry-ms", type=int, default=4000)
    ap.add_argument("--bind", help="bind this endpoint (one node) instead of a port of its own choosing")
    ap.add_argument("--advertise", help="the endpoint its beacons announce (default: the one it binds)")
    ap.add_argument("--data-dir", help="a store keeps its database in a file here (default: in memory)")
    ap.add_argument("--offset-reset", choices=("earliest", "latest"), default="earliest")
    ap.add_argument("--fetch-retry-ms", type=int, default=500)
    ap.add_argument("--empty-host", action="store_true")
    ap.add_argument("--two-nodes", action="store_true")
    ap.add_argument("--topic", default="weather")
    ap.add_argument("--records", type=int, default=20)
    ap.add_argument("--delay-ms", type=int, default=500)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--head-ms", type=int, default=200)
    ap.add_argument("--topics", default="weather", help="comma-separated")
    ap.add_argument("--subscribe-after-ms", type=int, default=0)
    args = ap.parse_args()
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())
    if args.data_dir:
        global SHARED_DB
        os.makedirs(args.data_dir, exist_ok=True)
        SHARED_DB = FileStore(os.path.join(args.data_dir, "store.db"))
    runtime = LiveRuntime()
    try:
        for name, factory, cfg in nodes(args):
            bind = args.bind or f"tcp://127.0.0.1:{own_port()}"
            announce = {"advertise": args.advertise} if args.advertise else {}
            runtime.add_node(name, factory, role=args.role, config={**cfg, "bind": bind, **announce})
        runtime.start()
        if args.subscribe_after_ms:
            for topic in (t for t in args.topics.split(",") if t):
                runtime.command(runtime.now_ns + args.subscribe_after_ms * 1_000_000, "consumer",
                                {"op": "subscribe", "topic": topic})
        print("READY", flush=True)
        while not stop.wait(0.2):
            if runtime.failures:
                print("\n".join(f.describe() for f in runtime.failures), file=sys.stderr, flush=True)
                return 1
    finally:
        runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
