"""A capture to a trace and verdicts: `check_pcap(path, options)`.

Two passes over the file, each streamed (memory stays flat however large it is):

1. the survey (`harness.capture.nodes`): which endpoints are which nodes, and their roles;
2. the conversion (`Converter`): every message decoded as its receiver would
   (`harness.capture.wire`), written to the trace in the common schema — a ``send`` row for
   the sending node and a ``recv`` row for the receiving one, with the same ``msg_id`` and the
   capture's time (nanoseconds since the first packet, as a live run counts from its start) —
   and fed to the protocol's checkers that are sound on a capture (``Checker.from_capture``)
   and to the clause tally.

A message a PUB or XPUB socket fans out is one send however many subscribers get it: the k-th
copy of the same frames on each subscriber's link within `FANOUT_WINDOW_NS` is the k-th send.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from harness.capture.nodes import NodeMap, PortSpec, Survey
from harness.capture.pcapfile import CaptureFileError, ReadStats
from harness.capture.streams import (
    ENCRYPTED, FRAMING, GAP, JOINED_LATE, NOT_ZMTP, Link, LinkDown, LinkReader, LinkUp, Problem, WireEvent,
    WireMessage, WireSubscription, read_links,
)
from harness.capture.wire import ClauseTally, Decoded, WireDecoder, only_in
from harness.checkers.base import RECV, SEND, Checker, Observer, Verdict
from harness.composition import HARNESS, RunResult, slug
from harness.protocols.codec import Message
from harness.registry import package
from harness.run_ids import unique_run_id
from harness.trace import NOTE, VERDICT, RunInfo, TraceWriter, pack_data, pack_frames

FANOUT_WINDOW_NS = 5_000_000_000
FANOUT_TYPES = ("PUB", "XPUB")
IMPLEMENTATION = "captured"
# Trace columns filled from a decoded message's fields, first present wins.
TOPIC_FIELDS = ("topic", "service", "subject", "channel")
SEQ_FIELDS = ("sequence",)
INDEX_FIELDS = ("log_index", "prev_log_index", "last_log_index", "index")


class PcapInputError(Exception):
    """Input that cannot be checked: no such protocol or dialect, not a capture, no ZMTP in it."""


@dataclass
class PcapOptions:
    protocol: str
    dialect: str = "strict"
    ports: dict[int, PortSpec] | None = None
    out_dir: str = "runs"
    name: str | None = None  # the run's scenario name (default pcap-<file stem>)
    implementation: str = IMPLEMENTATION
    record_frames: bool = True


@dataclass
class PcapResult(RunResult):
    not_applicable: list[tuple[str, str]] = field(default_factory=list)  # (check, why)
    notes: list[str] = field(default_factory=list)  # what the capture lacks that is nobody's fault
    nodes: dict[str, str] = field(default_factory=dict)  # node -> role

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["not_applicable"] = [{"check": c, "why": w} for c, w in self.not_applicable]
        d["notes"] = self.notes
        d["nodes"] = self.nodes
        return d


def routing_id(link: Link, client: bool) -> bytes:
    """The routing identity a ROUTER knows the peer on this side of the link by: the one it
    presented, else a 5-byte id like the ones libzmq makes up (unique per link)."""
    ident = link.sides[0 if client else 1].identity
    return ident or b"\x00" + link.id.to_bytes(4, "big")


def trace_columns(msg: Message) -> dict[str, Any]:
    f = msg.fields
    out: dict[str, Any] = {}
    for name in TOPIC_FIELDS:
        v = f.get(name)
        if isinstance(v, (str, bytes)):
            out["topic"] = v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v
            break
    for key, names in (("seq", SEQ_FIELDS), ("term", ("term",)), ("index", INDEX_FIELDS)):
        for name in names:
            v = f.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                out[key] = v
                break
    return out


class FanOut:
    """Which copies of a PUB socket's message are the same send (see the module docstring)."""

    def __init__(self) -> None:
        self._sends: OrderedDict[tuple[str, tuple[bytes, ...]], tuple[int, list[int], dict[int, int]]] = OrderedDict()

    def send_id(self, node: str, link: int, frames: list[bytes], t: int, new_id: int) -> tuple[int, bool]:
        while self._sends:
            first = next(iter(self._sends.values()))[0]
            if first >= t - FANOUT_WINDOW_NS:
                break
            self._sends.popitem(last=False)
        key = (node, tuple(frames))
        entry = self._sends.get(key)
        if entry is None:
            entry = (t, [], {})
            self._sends[key] = entry
        _, ids, counts = entry
        k = counts.get(link, 0)
        counts[link] = k + 1
        if k < len(ids):
            return ids[k], False
        ids.append(new_id)
        return new_id, True


class Converter:
    """The second pass: wire events to trace rows, checker events and clause tallies."""

    def __init__(self, trace: TraceWriter, observer: Observer, decoder: WireDecoder, nodes: NodeMap,
                 t0: int, dialect: str, record_frames: bool) -> None:
        self.trace = trace
        self.observer = observer
        self.decoder = decoder
        self.nodes = nodes
        self.t0 = t0
        grammar = decoder.codec.table.grammar_clause
        self.strict = ClauseTally(grammar)
        self.in_dialect = ClauseTally(grammar, f"dialect:{dialect}") if dialect != "strict" else None
        self.record_frames = record_frames
        self.fanout = FanOut()
        self.next_id = 1
        self.problems: dict[str, list[dict[str, Any]]] = {}
        self.messages = 0

    def node(self, link: Link, client: bool) -> str:
        return self.nodes.node_of.get((link.id, 0 if client else 1)) or link.sides[0 if client else 1].endpoint

    def on(self, ev: WireEvent) -> None:
        cls = ev.__class__
        if cls is WireMessage:
            self.message(ev)  # type: ignore[arg-type]
        elif cls is LinkUp:
            self.link_up(ev)  # type: ignore[arg-type]
        elif cls is WireSubscription:
            self.subscription(ev)  # type: ignore[arg-type]
        elif cls is Problem:
            self.problem(ev)  # type: ignore[arg-type]
        elif cls is LinkDown:
            self.link_down(ev)  # type: ignore[arg-type]

    def message(self, wm: WireMessage) -> None:
        self.messages += 1
        link, fc = wm.link, wm.from_client
        sender, receiver = self.node(link, fc), self.node(link, not fc)
        t = wm.time_ns - self.t0
        d = self.decoder.decode(wm)
        self._tally(d, wm, sender, receiver, t)
        if wm.sender.socket_type in FANOUT_TYPES:
            msg_id, new = self.fanout.send_id(sender, link.id, wm.frames, t, self.next_id)
        else:
            msg_id, new = self.next_id, True
        if new:
            self.next_id += 1
        cols = trace_columns(d.message) if d.message is not None else {}
        err = d.error or d.strict_error
        name = d.message.name if d.message is not None else ""
        size = sum(len(f) for f in wm.frames)
        packed = pack_frames(wm.frames) if self.record_frames else None
        detail = f"{err}{only_in(err)}" if err is not None else None
        clause = err.clause if err is not None else None
        emit = self.trace.emit
        if new:
            emit(sender, SEND, t, socket=wm.sender.socket_type.lower(), msg_type=name, peer=receiver, msg_id=msg_id,
                 size=size, clause=clause, detail=detail, frames=packed, **cols)
            self.observer.emit(t, sender, SEND, socket=wm.sender.socket_type.lower(), msg_type=name,
                               frames=self._as_seen(wm, sending=True))
        emit(receiver, RECV, t, socket=wm.receiver.socket_type.lower(), msg_type=name, peer=sender, msg_id=msg_id,
             size=size, clause=clause, detail=detail, frames=packed, **cols)
        self.observer.emit(t, receiver, RECV, socket=wm.receiver.socket_type.lower(), msg_type=name,
                           frames=self._as_seen(wm, sending=False))

    def _as_seen(self, wm: WireMessage, sending: bool) -> list[bytes]:
        """The frames as the node's application handed them over or read them: a ROUTER names
        the peer by its routing identity in front."""
        side = wm.sender if sending else wm.receiver
        if side.socket_type == "ROUTER":
            return [routing_id(wm.link, not wm.from_client if sending else wm.from_client), *wm.frames]
        return wm.frames

    def _tally(self, d: Decoded, wm: WireMessage, sender: str, receiver: str, t: int) -> None:
        def evidence(err: Any) -> dict[str, Any]:
            return {"time_ms": round(t / 1e6, 3), "from": sender, "to": receiver, "link": wm.link.describe(),
                    "error": f"{err}{only_in(err)}", "frames": ["0x" + f.hex() if f else "" for f in wm.frames[:12]]}

        strict_err = d.error if self.in_dialect is None else d.strict_error
        if strict_err is None:
            self.strict.conform()
        else:
            self.strict.violate(strict_err, evidence(strict_err))
        if self.in_dialect is not None:
            if d.error is None:
                self.in_dialect.conform()
            else:
                self.in_dialect.violate(d.error, evidence(d.error))

    def link_up(self, ev: LinkUp) -> None:
        link = ev.link
        c, s = link.sides
        client, server = self.node(link, True), self.node(link, False)
        detail = (f"ZMTP {c.version} {c.mechanism}: {c.socket_type} {c.endpoint} -> {s.socket_type} {s.endpoint}"
                  + (f", identity {c.identity!r}" if c.identity else ""))
        self.trace.emit(client, "connect", ev.time_ns - self.t0, socket=c.socket_type.lower(), peer=server,
                        detail=detail)

    def link_down(self, ev: LinkDown) -> None:
        link = ev.link
        self.decoder.forget_link(link.id)
        self.trace.emit(self.node(link, True), "disconnect", ev.time_ns - self.t0,
                        socket=link.sides[0].socket_type.lower(), peer=self.node(link, False),
                        detail="reset" if ev.reset else "closed")

    def subscription(self, ev: WireSubscription) -> None:
        link, fc = ev.link, ev.from_client
        self.trace.emit(self.node(link, fc), "subscribe" if ev.subscribe else "unsubscribe", ev.time_ns - self.t0,
                        socket=link.sides[0 if fc else 1].socket_type.lower(), peer=self.node(link, not fc),
                        topic=ev.topic.decode("utf-8", "backslashreplace"))

    def problem(self, ev: Problem) -> None:
        node = self.node(ev.link, ev.from_client)
        t = ev.time_ns - self.t0
        self.problems.setdefault(ev.kind, []).append({"time_ms": round(t / 1e6, 3), "node": node,
                                                      "link": ev.link.describe(), "detail": ev.detail})
        self.trace.emit(node, NOTE, t, msg_type=f"capture-{ev.kind}", peer=self.node(ev.link, not ev.from_client),
                        detail=f"{ev.link.describe()}: {ev.detail}")


# ---- the run ------------------------------------------------------------------------------------


def _checkers(protocol: str, scenario: Any) -> tuple[list[Checker], list[tuple[str, str]]]:
    """The package's checks that are sound on a capture, built; the others with the reason."""
    from harness.checkers.base import COMMAND, CRASH, DELIVER, NOTE as NOTE_KIND, RESTART

    wanted = {COMMAND: "application commands", DELIVER: "application deliveries", NOTE_KIND: "node notes",
              CRASH: "crashes", RESTART: "restarts"}
    run, skip = [], []
    for name, check in package(protocol).checks.items():
        cls = check.checker
        if cls is not None and getattr(cls, "from_capture", False):
            run.append(check.factory(scenario))
            continue
        kinds = getattr(cls, "kinds", None)
        lacking = [wanted[k] for k in wanted if kinds is None or k in kinds]
        note = getattr(cls, "capture_note", "")
        why = note or (f"needs {', '.join(lacking)}, which a capture does not hold" if lacking else
                       "not shown to be sound on a capture alone")
        skip.append((name, why))
    return run, skip


def _scenario(protocol: str, name: str, dialect: str, path: str, nodes: NodeMap) -> Any:
    from fault_injection.rules import RuleSet
    from harness.scenario import NodeGroup, Scenario
    from harness.targets import Targets

    groups = {n: NodeGroup(n, role, None, {}, implementation=IMPLEMENTATION) for n, role in nodes.roles.items()}
    targets = Targets({n: [n] for n in groups}, dict(nodes.roles), package(protocol))
    return Scenario(path=path, protocol=protocol, name=name, description=f"capture {path}", duration_ns=0,
                    seeds=[0], dialect=dialect, groups=groups, latency={}, rules=RuleSet([]), faults=[],
                    workload=[], checks=[], settle_ns=0, targets=targets)


def _links(path: str, ports: set[int] | None, read_stats: ReadStats, reader: LinkReader) -> Any:
    try:
        yield from read_links(path, ports, read_stats, reader)
    except CaptureFileError as e:
        raise PcapInputError(str(e)) from None


def check_pcap(path: str, options: PcapOptions) -> PcapResult:
    """Read the capture, write its trace, run the checks; see the module docstring."""
    started = time.monotonic()
    try:
        pkg = package(options.protocol)
        decoder = WireDecoder(options.protocol, options.dialect, pkg.capture)
    except KeyError as e:
        raise PcapInputError(str(e.args[0])) from None
    port_set = set(options.ports) if options.ports else None
    survey = Survey(decoder.codec, options.ports, pkg.capture)
    first = LinkReader(port_set)
    for ev in _links(path, port_set, ReadStats(), first):
        survey.on(ev)
    if not first.stats.links:
        where = f"on port(s) {', '.join(map(str, sorted(port_set)))}" if port_set else "(no connection starts " \
                "with a ZMTP greeting)"
        problems = "; ".join(f"{n} {k}" for k, n in first.stats.problems.items())
        raise PcapInputError(f"{path}: no ZMTP connection to check {where}: {first.stats.tcp_connections} TCP "
                             f"connection(s)" + (f"; {problems}" if problems else ""))
    nodes = survey.nodes()
    name = options.name or f"pcap-{os.path.splitext(os.path.basename(path))[0]}"
    scenario = _scenario(options.protocol, name, options.dialect, path, nodes)
    checkers, skipped = _checkers(options.protocol, scenario)
    observer = Observer(checkers, decoder.codec, nodes.roles)
    out = os.path.join(options.out_dir, slug(name))
    tpath = os.path.join(out, "pcap.parquet")
    trace = TraceWriter(tpath, RunInfo(unique_run_id(f"{name}/pcap"), 0, name, options.protocol))
    trace.register_node(HARNESS, HARNESS, "")
    for n, role in nodes.roles.items():
        trace.register_node(n, role, options.implementation)
    t0 = first.stats.first_ns or 0
    read_stats, second = ReadStats(), LinkReader(port_set, cuts=first.gaps)
    try:
        conv = Converter(trace, observer, decoder, nodes, t0, options.dialect, options.record_frames)
        trace.emit(HARNESS, NOTE, 0, msg_type="capture", detail=f"{path}: capture started at {t0} ns since the epoch",
                   data=pack_data({"file": os.path.abspath(path), "start_epoch_ns": t0, "protocol": options.protocol,
                                   "dialect": options.dialect, "ports": sorted(port_set or [])}))
        for ev in _links(path, port_set, read_stats, second):
            conv.on(ev)
        end = (second.stats.last_ns or t0) - t0
        verdicts = observer.finish(end) + conv.strict.verdicts()
        if conv.in_dialect is not None:
            verdicts += conv.in_dialect.verdicts()
        verdicts += _capture_verdicts(conv, read_stats)
        for v in verdicts:
            trace.emit(HARNESS, VERDICT, end, verdict="pass" if v.ok else "fail", clause=v.clause or v.check,
                       msg_type=v.check, detail=v.detail)
        for check, why in skipped:
            trace.emit(HARNESS, VERDICT, end, verdict="skipped", clause=check, msg_type=check,
                       detail=f"not applicable to a capture: {why}")
    finally:
        trace.close()
    stats = _stats(second, read_stats, conv, nodes, time.monotonic() - started)
    result = PcapResult(name, 0, "pcap", verdicts, stats, tpath, not_applicable=skipped, notes=_notes(second),
                        nodes=dict(nodes.roles))
    result.result_path = os.path.join(out, "pcap.json")
    with open(result.result_path, "w") as f:
        json.dump(result.to_dict(), f, indent=2, default=str)
    return result


def _capture_verdicts(conv: Converter, read_stats: ReadStats) -> list[Verdict]:
    framing = conv.problems.get(NOT_ZMTP, []) + conv.problems.get(FRAMING, [])
    gaps = conv.problems.get(GAP, [])
    out = []
    if framing:
        out.append(Verdict("zmtp-framing", "", False, f"{len(framing)} connection(s) broke the ZMTP framing "
                           f"(nothing after the error was read); first: {framing[0]['detail']}", framing[:20]))
    else:
        out.append(Verdict("zmtp-framing", "", True, "every connection read was valid ZMTP 3 framing"))
    if gaps or read_stats.truncated_file:
        what = [f"{len(gaps)} connection(s) with bytes missing (each read up to its gap only)"] if gaps else []
        if read_stats.truncated_file:
            what.append("the file ends inside a packet record")
        out.append(Verdict("capture-complete", "", False, "the capture is incomplete, so the checks saw only part "
                           "of the traffic (a fault of the capture, not necessarily of the implementation): "
                           + "; ".join(what), gaps[:20]))
    else:
        out.append(Verdict("capture-complete", "", True, "no bytes missing from any connection read"))
    return out


def _notes(reader: LinkReader) -> list[str]:
    p = reader.stats.problems
    notes = []
    if p.get(JOINED_LATE):
        notes.append(f"{p[JOINED_LATE]} connection(s) began before the capture and were not read (their start, the "
                     "ZMTP greeting, is not in it" + (")" if reader.ports else "; some may not be ZMTP at all)"))
    if p.get(ENCRYPTED):
        notes.append(f"{p[ENCRYPTED]} connection(s) use CURVE encryption and cannot be read from a capture")
    if reader.stats.ignored_connections:
        notes.append(f"{reader.stats.ignored_connections} TCP connection(s) ignored (not on the ports, or not ZMTP)")
    return notes


def _stats(reader: LinkReader, read_stats: ReadStats, conv: Converter, nodes: NodeMap, wall_s: float) -> dict[str, Any]:
    st = reader.stats
    re = reader.reassembly
    return {
        "packets": read_stats.packets, "tcp_segments": read_stats.tcp_segments, "skipped_packets": read_stats.skipped,
        "truncated_packets": read_stats.truncated_packets, "truncated_file": read_stats.truncated_file,
        "tcp_connections": st.tcp_connections, "links": st.links, "messages": conv.messages,
        "zmtp_commands": st.commands, "problems": st.problems,
        "retransmitted_bytes": re.retransmitted_bytes if re else 0,
        "out_of_order_segments": re.out_of_order_segments if re else 0,
        "duration_s": round(((st.last_ns or 0) - (st.first_ns or 0)) / 1e9, 6), "wall_s": round(wall_s, 3),
        "nodes": {n: {"role": r, "socket": nodes.socket_types.get(n, ""), "endpoints": nodes.endpoints.get(n, [])}
                  for n, r in nodes.roles.items()},
    }
