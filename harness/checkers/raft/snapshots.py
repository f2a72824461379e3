"""Raft snapshots, judged from the wire: a snapshot holds the state of the committed log up to
its last included index (Raft section 7: the snapshot replaces the log prefix it covers).

Every snapshot that crosses the wire is assembled from its chunks: InstallSnapshot chunks a
leader sends (or a peer receives), and the status 3 chunks of RequestEntries responses a peer
sends (or a client receives). One in the documented key-value format (docs/raft.md, "Key-value
encoding of log data"; `harness.protocols.raft_kv`) is compared with the key-value state that
replaying the committed entries 1 .. its last included index produces. The committed entries are
what the run's `KnowledgeBase` learns (their term and CRC-32); their bytes are the entry frames
seen on the wire with that index, term and CRC. A snapshot in another format, or one whose
prefix holds an entry the wire never showed, is not judged. When the replay lacks an entry,
a later snapshot can still be judged from an earlier one: the earlier snapshot plus the
committed entries after it must give the later one (if they disagree, one of the two is wrong).
"""

from __future__ import annotations

import zlib
from typing import Any

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Event, Verdict
from harness.checkers.raft.commits import KnowledgeChecker
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.logs import _skip
from harness.checkers.raft.wire import PEER_RPCS, entries_of, entry_term, only, show
from harness.protocols.codec import Message
from harness.protocols.raft import RE_SNAPSHOT
from harness.protocols.raft_kv import apply_raw_entry, pack, snapshot_kv

MAX_SNAPSHOT_BYTES = 16 << 20  # a larger snapshot is not assembled (not judged)
MAX_ENTRY_BYTES = 64 << 20  # entry frames kept for the replay; beyond, later entries are unknown
SHOWN_KEYS = 10  # differing keys shown in a failure's evidence


class Snapshot:
    """One snapshot transfer seen on the wire: its chunks until it is whole."""

    __slots__ = ("index", "size", "parts", "ref", "sender")

    def __init__(self, index: int, size: int, sender: str) -> None:
        self.index, self.size, self.sender = index, size, sender
        self.parts: dict[int, bytes] = {}
        self.ref: tuple[Event, Message] | None = None

    def add(self, offset: int, chunk: bytes) -> bytes | None:
        """Take one chunk; the whole snapshot once every byte has come."""
        if chunk:
            self.parts[offset] = chunk
        out, pos = [], 0
        while pos < self.size:
            part = self.parts.get(pos)
            if part is None:
                return None
            out.append(part)
            pos += len(part)
        data = b"".join(out)
        return data[:self.size] if pos >= self.size else None


def _by_index_then_time(item: tuple[tuple[int, int], tuple[Snapshot, bytes]]) -> tuple[int, int]:
    ref = item[1][0].ref
    return item[0][0], ref[0].time_ns if ref is not None else 0


def _differing(model: dict[str, Any], state: dict[str, Any]) -> list[str]:
    """The keys whose values differ, sorted. Values equal in Python or in their MessagePack
    encoding are the same (a NaN is a NaN)."""
    out = []
    for k in model.keys() | state.keys():
        if k not in model or k not in state:
            out.append(k)
            continue
        a, b = model[k], state[k]
        if a != b and pack(a) != pack(b):
            out.append(k)
    return sorted(out, key=str)


def _plain(v: Any) -> Any:
    """A key-value value as evidence (JSON-friendly)."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)[:120]


class SnapshotState(KnowledgeChecker):
    """A snapshot holds exactly the key-value state of the committed log up to its last
    included index. Reads the snapshots on the wire (InstallSnapshot chunks, status 3
    RequestEntries chunks), assembled, and the committed entries the wire shows (the
    knowledge base, with the entry frames of AppendEntries, RequestEntries and StateBroadcast).
    Judges only snapshots in the documented key-value format whose prefix is known (or that
    follow a snapshot by known entries); says how many were not judged and why."""

    name = "snapshot-state"
    clause = "raft.safety.state-machine-safety"

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(peers, **params)
        self.transfers: dict[tuple[Any, ...], Snapshot] = {}
        self.done: set[tuple[Any, ...]] = set()
        self.whole: dict[tuple[int, int], tuple[Snapshot, bytes]] = {}  # (index, crc) -> first seen whole
        self.content: dict[tuple[int, int], list[bytes]] = {}  # (index, term) -> entry frames seen
        self.kept = 0  # bytes of entry frames kept
        self.too_large = 0

    # ---- the wire --------------------------------------------------------------------------
    def keep_entries(self, ev: Event, msg: Message, skip: int = 0) -> None:
        first, raws = entries_of(ev, msg, skip)
        content = self.content
        for k, raw in enumerate(raws):
            seen = content.setdefault((first + k, entry_term(raw)), [])
            if raw not in seen and self.kept < MAX_ENTRY_BYTES:
                seen.append(bytes(raw))
                self.kept += len(raw)

    def chunk(self, key: tuple[Any, ...], index: int, size: int, offset: int, chunk: bytes, sender: str,
              ev: Event, msg: Message) -> None:
        if key in self.done:
            return
        if size > MAX_SNAPSHOT_BYTES:
            self.done.add(key)
            self.too_large += 1
            return
        snap = self.transfers.get(key)
        if snap is None:
            snap = self.transfers[key] = Snapshot(index, size, sender)
        data = snap.add(offset, bytes(chunk))
        if data is None:
            return
        snap.ref = (ev, msg)
        self.done.add(key)
        del self.transfers[key]
        self.whole.setdefault((index, zlib.crc32(data)), (snap, data))

    def install(self, ev: Event, msg: Message, sender: str) -> None:
        self.chunk(("install", ev.node, ev.socket, msg["peer_id"], msg["term"], msg["last_included_index"],
                    msg["snapshot_size"]), msg["last_included_index"], msg["snapshot_size"], msg["snapshot_offset"],
                   msg["chunk"], sender, ev, msg)

    @only("AppendEntries", "InstallSnapshot")
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name == "AppendEntries":
            self.keep_entries(ev, msg)
        elif msg.name == "InstallSnapshot":
            self.install(ev, msg, ev.node)

    @only("InstallSnapshot")
    def request_received(self, ev: Event, msg: Message) -> None:
        if msg.name == "InstallSnapshot":
            self.install(ev, msg, f"{msg['peer_id']} (to {ev.node})")

    def entries_response(self, ev: Event, request: Message, msg: Message, sender: str) -> None:
        if msg["status"] != RE_SNAPSHOT:
            self.keep_entries(ev, msg, _skip(ev))
            return
        offset, size = msg["snapshot_info"][:2]
        self.chunk(("entries", ev.node, ev.socket, msg["reqid"], msg["last_index"], size), msg["last_index"], size,
                   offset, msg["chunk"], sender, ev, msg)

    @only("RequestEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.entries_response(ev, request, msg, ev.node)

    @only("RequestEntriesResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.entries_response(ev, request, msg, f"a peer answering {ev.node}")

    def broadcast(self, ev: Event, msg: Message) -> None:
        self.keep_entries(ev, msg)

    # ---- the judgement ---------------------------------------------------------------------
    def committed_frame(self, i: int) -> bytes | None:
        """The frame of the committed entry at ``i``, when the wire showed both."""
        fact = self.kb.committed.get(i)
        if fact is None or fact.term is None or fact.crc is None:
            return None
        for raw in self.content.get((i, fact.term), ()):
            if zlib.crc32(raw) == fact.crc:
                return raw
        return None

    def finish(self, end_ns: int) -> list[Verdict]:
        problems: list[tuple[str, list[dict[str, Any]]]] = []
        judged, foreign, unknown = 0, 0, 0
        kv: dict[str, Any] | None = {}  # the model: the state after entry `pos` (None: unknown)
        pos = 0
        base: Snapshot | None = None  # the snapshot the model starts from (None: index 1)
        missing = 0  # the first unknown committed entry, while the model is unknown
        for (index, _), (snap, data) in sorted(self.whole.items(), key=_by_index_then_time):
            state = snapshot_kv(data)
            if state is None:
                foreign += 1
                continue
            while kv is not None and pos < index:
                raw = self.committed_frame(pos + 1)
                if raw is None:
                    kv, missing = None, missing or pos + 1
                    break
                apply_raw_entry(kv, raw)
                pos += 1
            if kv is None:  # not judged; the snapshot seeds the replay from here on
                unknown += 1
                kv, pos, base = dict(state), index, snap
                continue
            judged += 1
            if state != kv and _differing(kv, state) and len(problems) < 50:
                problems.append(self.difference(snap, kv, state, base))
        whole = len(self.whole)
        detail = (f"{whole} snapshot(s) seen whole: judged {judged}; not judged {foreign + unknown}"
                  f" ({foreign} not in the key-value snapshot format, {unknown} with a committed entry of their"
                  f" prefix not shown on the wire{f', first {missing}' if missing else ''})")
        if self.transfers or self.too_large:
            detail += (f"; {len(self.transfers)} transfer(s) never whole, {self.too_large} over "
                       f"{MAX_SNAPSHOT_BYTES} bytes")
        return self.verdict(problems, detail)

    def difference(self, snap: Snapshot, model: dict[str, Any], state: dict[str, Any],
                   base: Snapshot | None) -> tuple[str, list[dict[str, Any]]]:
        keys = _differing(model, state)
        diff = {str(k): {"model": _plain(model[k]) if k in model else "absent",
                         "snapshot": _plain(state[k]) if k in state else "absent"} for k in keys[:SHOWN_KEYS]}
        ev, msg = snap.ref or (None, None)
        when = f"{ev.time_ns / 1e6:.1f} ms" if ev is not None else "?"
        if base is None:
            text = (f"the snapshot at index {snap.index} sent by {snap.sender} (whole at {when}) differs from the "
                    f"committed log replayed up to {snap.index} in {len(keys)} key(s)")
        else:
            text = (f"the snapshot at index {snap.index} sent by {snap.sender} (whole at {when}) differs in "
                    f"{len(keys)} key(s) from the snapshot at {base.index} sent by {base.sender} plus the committed "
                    f"entries after it: one of the two is wrong")
        evidence = [show(ev, msg, index=snap.index, sender=snap.sender, keys=diff)] if ev is not None else []
        if base is not None and base.ref is not None:
            evidence.append(show(*base.ref, index=base.index, sender=base.sender))
        return text, evidence


class SnapshotResume(RaftChecker):
    """A leader sends its next snapshot chunk from the byte offset the follower's answer names
    (E-RAFT-20, ``raft.snapshot.resume-offset``): the follower keeps only a chunk at the offset it
    expects, so a leader that goes on from its own count after the follower lost its partial
    snapshot (it restarted) sends chunks the follower throws away.

    Reads each leader's InstallSnapshot requests on each of its links to a follower and the
    answers it received. An answer that names an offset below the snapshot's size, to the latest
    request on that link (an answer to an earlier one is stale: the leader may have moved on, or
    send several chunks at once), and of the request's term (a higher term deposes the leader; an
    answer of a lower one it may ignore, as Raft 5.1 has it), obliges the next new request of the
    link (another message id: a repeat of the answered one keeps the obligation) that sends a
    chunk of the same snapshot in the same term to start at that offset. A request of anything
    else (another snapshot, another term, an AppendEntries) ends the obligation: the leader
    moved on. A crash or restart of the leader forgets its links. An external leader seen by the
    chaos proxy is judged the same way: an answer is handed on before the leader takes it in, and
    a leader with one chunk in flight (node-zmq-raft's, the reference's) sends its next one only
    after that. One with several in flight may, live, be read sending a chunk after the proxy
    handed on an answer it had not yet taken in: for an external leader the check assumes one
    chunk in flight."""

    name = "snapshot-resume"
    clause = "raft.snapshot.resume-offset"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.latest: dict[tuple[str, str], Message] = {}  # (leader node, link socket) -> its latest peer request
        # (leader node, link socket) -> (offset owed, the answer naming it, the request it answered)
        self.owed: dict[tuple[str, str], tuple[int, Event, Message, Message]] = {}
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.named = 0  # answers that named an offset the leader had to follow
        self.resumed = 0  # ... other than the end of the chunk they answered (the follower lost or missed some)
        self.judged = 0

    def on_other(self, ev: Event) -> None:
        node = ev.node
        self.latest = {k: v for k, v in self.latest.items() if k[0] != node}
        self.owed = {k: v for k, v in self.owed.items() if k[0] != node}

    @staticmethod
    def transfer(msg: Message) -> tuple[Any, ...]:
        return msg["term"], msg["last_included_index"], msg["last_included_term"], msg["snapshot_size"]

    @only(*PEER_RPCS)
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name not in PEER_RPCS:
            return
        link = (ev.node, ev.socket)  # (a DEALER's: the tracker reports no request sent on a ROUTER)
        snap = msg if msg.name == "InstallSnapshot" else None
        self.latest[link] = msg
        owed = self.owed.get(link)
        if owed is None:
            return
        offset, answer_ev, answer, request = owed
        if snap is not None and msg["message_id"] == request["message_id"]:
            return  # the answered request sent again: the obligation holds for the next new one
        del self.owed[link]
        if snap is None or self.transfer(snap) != self.transfer(request):
            return  # the leader moved on (another snapshot, term or request)
        self.judged += 1
        if snap["snapshot_offset"] != offset and len(self.problems) < 50:
            self.problems.append((
                f"{ev.node} sent the chunk at byte {snap['snapshot_offset']} of the snapshot at index "
                f"{snap['last_included_index']} ({snap['snapshot_size']} bytes) on {ev.socket} after the "
                f"follower's answer asked for byte {offset}",
                [show(answer_ev, answer, answered_offset=request["snapshot_offset"]), show(ev, msg)]))

    @only("InstallSnapshotResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name != "InstallSnapshotResponse":
            return
        link = (ev.node, ev.socket)
        offset = msg.get("next_offset")
        latest = self.latest.get(link)
        if offset is None or latest is None or latest.name != "InstallSnapshot" \
                or latest["message_id"] != request["message_id"]:
            return  # no offset, or an answer to a request the leader has since followed by another
        if offset >= request["snapshot_size"] or msg["term"] != request["term"]:
            return  # past the end (the transfer is done); a higher term deposes the leader, a lower one it may ignore
        self.named += 1
        self.resumed += offset != request["snapshot_offset"] + len(request["chunk"])
        self.owed[link] = (offset, ev, msg, request)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.named} answer(s) to the latest chunk named the offset to go on "
                                           f"from ({self.resumed} of them not the end of the chunk answered); "
                                           f"{self.judged} next chunk(s) of the same snapshot judged, each from "
                                           f"that offset")
