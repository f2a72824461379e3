"""Trace rows: one flat schema for simulated, live and pcap-derived runs, written as Parquet.

Every send, receive, drop, fault, crash, restart, application delivery and verdict is a row.
The schema is documented in docs/traces.md; `SCHEMA` below is the source of truth.

Writing is cheap on the hot path: `emit` extends one flat list with the row's values (no
per-row object survives, so the garbage collector has nothing to scan), and each column of a
row group is a strided slice of that list, built at C speed. Run-wide columns (run, seed,
scenario, protocol) and per-node columns (role, implementation) are filled in at flush time,
as dictionary arrays the Parquet writer takes as they are. The file is written in row groups
as rows accumulate, and `close()` (also called by the context manager on an exception) always
leaves a readable file, so an aborted run loses nothing that was emitted.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq

# Row kinds. Free-form kinds are allowed, these are the ones the harness itself writes.
SEND, RECV, DROP, FAULT, CRASH, RESTART, PAUSE, RESUME = (
    "send", "recv", "drop", "fault", "crash", "restart", "pause", "resume",
)
DELIVER, DISCARD, NOTE, COMMAND, VERDICT = "deliver", "discard", "note", "command", "verdict"
CONNECT, DISCONNECT, ERROR = "connect", "disconnect", "error"
STALL = "stall"  # live only: the runtime fired an in-process node's timer late (its loop was busy)
LIFECYCLE = (CRASH, RESTART, PAUSE, RESUME)

SCHEMA = pa.schema(
    [
        ("run", pa.string()),  # run id: "<scenario>/<seed>" in simulation, a timestamped id live
        ("seed", pa.int64()),
        ("scenario", pa.string()),
        ("protocol", pa.string()),
        ("implementation", pa.string()),  # "reference", "mutant:<name>", or the external command
        ("node", pa.string()),
        ("role", pa.string()),
        ("kind", pa.string()),  # one of the kinds above
        ("time_ns", pa.int64()),  # virtual time in simulation, wall time since run start live
        ("socket", pa.string()),
        ("msg_type", pa.string()),
        ("peer", pa.string()),  # the other node (or endpoint) of a send/recv/drop
        ("topic", pa.string()),  # partition / topic / service / channel
        ("seq", pa.int64()),  # sequence / offset, when the message has one
        ("term", pa.int64()),
        ("index", pa.int64()),
        ("msg_id", pa.int64()),  # same id on a message's send and its receive(s)/drop
        ("corr", pa.string()),  # correlation id of an application request, for latency
        ("size", pa.int64()),  # bytes over all frames
        ("fault", pa.string()),  # fault applied to this message or event ("drop:rule-2", ...)
        ("verdict", pa.string()),  # for verdict rows: pass / fail / error / skipped
        ("clause", pa.string()),  # clause or invariant id a discard/verdict refers to
        ("detail", pa.string()),  # human-readable detail (reason, decoded summary)
        ("frames", pa.binary()),  # msgpack list of the raw frames, when recorded
        ("data", pa.binary()),  # msgpack of a command's, delivery's or note's data (pack_data)
    ]
)
COLUMNS = tuple(SCHEMA.names)
# Columns the emitter supplies per row (the rest are filled at flush), in buffer order: what
# a row says of its event first, then MESSAGE_COLUMNS, which a message's rows (its send, its
# receives, its drop) all share, so the simulator builds them once per message (``emit_message``).
MESSAGE_COLUMNS = ("msg_type", "topic", "seq", "term", "index", "msg_id", "corr", "size", "verdict", "clause",
                   "data")
ROW_COLUMNS = ("node", "kind", "time_ns", "socket", "peer", "fault", "detail", "frames") + MESSAGE_COLUMNS
ROW_WIDTH = len(ROW_COLUMNS)
# Rows per Parquet row group. Small enough that a run's buffers (rows, then their Arrow
# columns and Parquet pages) stay a few MB and are reused from one group to the next instead of
# growing the process; large enough that per-group overhead stays negligible.
ROW_GROUP_ROWS = 16384
# Columns with few distinct values get Parquet dictionary encoding; on the others (times, ids,
# details, frames) the writer would build a dictionary only to give it up.
DICTIONARY_COLUMNS = [c for c in COLUMNS if c not in ("time_ns", "msg_id", "corr", "detail", "frames", "data")]
# Columns with min/max statistics: those a reader filters row groups or files on (a run, a
# node, a kind, a time range, a message id, a verdict). On the others (payloads, peers,
# correlation ids, columns that follow from the run or the node) min/max never prune anything
# and cost a quarter of the write.
STATISTICS_COLUMNS = ["run", "seed", "node", "kind", "time_ns", "seq", "term", "index", "msg_id", "verdict"]


# Columns handed to the writer as dictionary arrays (see TraceWriter.flush); in the file they
# are plain strings, dictionary-encoded like the other DICTIONARY_COLUMNS.
_RUN_TEXT = ("run", "scenario", "protocol")
_DICTIONARY_TYPED = _RUN_TEXT + ("node", "role", "implementation")
_WRITE_SCHEMA = pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in _DICTIONARY_TYPED else f
                          for f in SCHEMA])


def _through(indices: pa.Array, values: list[str]) -> pa.DictionaryArray:
    """``values[indices[i]]`` for every row, as a dictionary array with each value once (a
    dictionary with repeated values makes the Parquet writer fall back to plain encoding)."""
    import pyarrow.compute as pc  # not at the top: most of pyarrow's import time, which a `node` would pay
    position = {v: i for i, v in enumerate(dict.fromkeys(values))}
    where = pa.array([position[v] for v in values], pa.int32())
    return pa.DictionaryArray.from_arrays(pc.take(where, indices), pa.array(list(position), pa.string()))


def pack_frames(frames: Iterable[bytes]) -> bytes:
    return msgpack.packb(list(frames), use_bin_type=True)


def unpack_frames(blob: bytes | None) -> list[bytes] | None:
    if blob is None:
        return None
    return list(msgpack.unpackb(blob, raw=False))


def _sort_key(value: Any) -> tuple[str, str]:
    return (type(value).__name__, stable_repr(value))


def _data_default(value: Any) -> Any:
    """What MessagePack has no type for: sets become sorted lists (hash order never reaches the
    trace), anything else its ``repr`` as text."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=_sort_key)
    return stable_repr(value)


_data_packer = msgpack.Packer(use_bin_type=True, default=_data_default)


def pack_data(value: Any) -> bytes:
    """The ``data`` column of a command, delivery or note row: its data as MessagePack, lossless
    for the plain values nodes use (dicts, lists, tuples as lists, str, bytes, int, float,
    bool, None) and cheap to write (the repr of a 100-byte payload costs several times more)."""
    try:
        return _data_packer.pack(value)
    except ValueError:  # nested deeper than MessagePack's limit (hundreds of levels)
        return _data_packer.pack(f"<{type(value).__name__} nested too deep to record>")


def stable_repr(value: Any) -> str:
    """``repr`` with sets sorted, so a text never depends on hash order."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(stable_repr(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(stable_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, (set, frozenset)):
        items = sorted(stable_repr(v) for v in value)
        if isinstance(value, frozenset):
            return "frozenset({" + ", ".join(items) + "})" if items else "frozenset()"
        return "{" + ", ".join(items) + "}" if items else "set()"
    return repr(value)


def unpack_data(blob: bytes | None) -> Any:
    """A ``data`` cell back as Python values (dict keys may be of any scalar type)."""
    if blob is None:
        return None
    return msgpack.unpackb(blob, raw=False, strict_map_key=False)


@dataclass(frozen=True)
class RunInfo:
    run: str
    seed: int
    scenario: str
    protocol: str


class TraceWriter:
    """Buffers rows and writes them as Parquet row groups to ``path``."""

    def __init__(self, path: str, info: RunInfo, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.path = path
        self.info = info
        self.row_group_rows = row_group_rows
        # Row values back to back, ROW_WIDTH per row: column i of the buffered rows is
        # ``_flat[i::ROW_WIDTH]``.
        self._flat: list[Any] = []
        self._flush_at = row_group_rows * ROW_WIDTH  # the buffer's size that writes a row group at once
        self._group_at = self._flush_at  # the size of a full row group (`flush_due`)
        self._nodes: dict[str, tuple[str, str]] = {}
        self._writer: pq.ParquetWriter | None = None
        self.rows_written = 0
        self.closed = False
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)

    def register_node(self, node: str, role: str, implementation: str = "reference") -> None:
        self._nodes[node] = (role, implementation)

    def emit(
        self,
        node: str,
        kind: str,
        time_ns: int,
        socket: str | None = None,
        msg_type: str | None = None,
        peer: str | None = None,
        topic: str | None = None,
        seq: int | None = None,
        term: int | None = None,
        index: int | None = None,
        msg_id: int | None = None,
        corr: str | None = None,
        size: int | None = None,
        fault: str | None = None,
        verdict: str | None = None,
        clause: str | None = None,
        detail: str | None = None,
        frames: bytes | None = None,
        data: bytes | None = None,
    ) -> None:
        flat = self._flat
        flat += (node, kind, time_ns, socket, peer, fault, detail, frames, msg_type, topic, seq, term, index,
                 msg_id, corr, size, verdict, clause, data)
        if len(flat) >= self._flush_at:
            self.flush()

    def emit_message(self, node: str, kind: str, time_ns: int, socket: str | None, peer: str | None,
                     fault: str | None, detail: str | None, frames: bytes | None,
                     message: tuple[Any, ...]) -> None:
        """A row of a message (send, recv, drop, fault on it): ``message`` holds the values of
        MESSAGE_COLUMNS, made once per message (verdict, clause and data are None)."""
        flat = self._flat
        flat += (node, kind, time_ns, socket, peer, fault, detail, frames)
        flat += message
        if len(flat) >= self._flush_at:
            self.flush()

    # ---- named rows: what the simulator and the live runtime record, built in one place ----
    #
    # Each says which columns an event of its kind fills; the rest stay null. Positional
    # appends (no keyword handling): they run for every command, delivery and note.

    def lifecycle(self, node: str, kind: str, time_ns: int, detail: str | None = None) -> None:
        """A node crashed, restarted, paused or resumed (``kind`` in LIFECYCLE; the fault
        column says the same, so fault filters see node faults next to message faults)."""
        self._row(node, kind, time_ns, None, None, kind, detail, None, None, None, None, None, None, None, None,
                  None, None, None, None)

    def fault(self, node: str, time_ns: int, fault: str, detail: str | None = None, *,
              socket: str | None = None, peer: str | None = None) -> None:
        """A fault that acts on no single message: a partition, a slow link, a clock change, a
        skipped fault, or a socket-level problem (``node`` is the nemesis for network faults)."""
        self._row(node, FAULT, time_ns, socket, peer, fault, detail, None, None, None, None, None, None, None,
                  None, None, None, None, None)

    def stall(self, node: str, time_ns: int, late_ns: int) -> None:
        """Live only: the runtime fired the in-process node's timer ``late_ns`` after it was due
        (its one loop was busy with other nodes): the timing checks excuse the node that much."""
        self._row(node, STALL, time_ns, None, None, None, f"held {late_ns / 1e6:.1f} ms past its timer", None, None,
                  None, None, None, None, None, None, None, None, None, None)

    def connection(self, node: str, kind: str, time_ns: int, socket: str | None, peer: str | None,
                   endpoint: str | None, cause: str | None = None) -> None:
        """A connection came up (CONNECT) or went down (DISCONNECT, ``cause`` in the fault column)."""
        self._row(node, kind, time_ns, socket, peer, cause, endpoint, None, None, None, None, None, None, None,
                  None, None, None, None, None)

    def command(self, node: str, time_ns: int, request: dict[str, Any], fault: str | None = None) -> None:
        """The application handed ``request`` to the node (``fault``: why it was not, e.g.
        ``node-down``); its correlation and ids go to their columns (``meta_columns``)."""
        topic, seq, term, index, corr = meta_columns(request)
        op = request.get("op", request.get("type", ""))
        self._row(node, COMMAND, time_ns, None, None, fault, None, None, str(op), topic, seq, term, index, None,
                  corr, None, None, None, pack_data(request))

    def delivery(self, node: str, kind: str, time_ns: int, what: str, data: dict[str, Any] | None) -> None:
        """A node's ``Deliver`` (kind DELIVER) or ``Note`` (kind NOTE) of type ``what``."""
        topic, seq, term, index, corr = meta_columns(data) if data else (None, None, None, None, None)
        self._row(node, kind, time_ns, None, None, None, None, None, what, topic, seq, term, index, None, corr,
                  None, None, None, pack_data(data))

    def discard(self, node: str, time_ns: int, socket: str | None, size: int, clause: str | None,
                reason: str, frames: bytes | None) -> None:
        """The node dropped an input as its specification requires (``Discard``)."""
        self._row(node, DISCARD, time_ns, socket, None, None, reason, frames, None, None, None, None, None, None,
                  None, size, None, clause, None)

    def local(self, node: str, time_ns: int, socket: str, msg_type: str, peer: str | None, size: int,
              detail: str, frames: bytes | None) -> None:
        """Something a socket tells its own node (an XPUB unsubscription when a peer left)."""
        self._row(node, RECV, time_ns, socket, peer, None, detail, frames, msg_type, None, None, None, None, None,
                  None, size, None, None, None)

    def socket_note(self, node: str, time_ns: int, socket: str, what: str, detail: str) -> None:
        """A socket-level event worth a row (a disconnect from an endpoint never connected)."""
        self._row(node, NOTE, time_ns, socket, None, None, detail, None, what, None, None, None, None, None, None,
                  None, None, None, None)

    def subscription(self, node: str, kind: str, time_ns: int, socket: str, topic: bytes) -> None:
        """A live node subscribed or unsubscribed (the simulator records the socket's own
        subscription message instead; real sockets do not show it)."""
        self._row(node, kind, time_ns, socket, None, None, None, None, None, _text(topic), None, None, None, None,
                  None, None, None, None, None)

    def error(self, node: str, time_ns: int, where: str, detail: str) -> None:
        """A node raised in ``where`` (or misbehaved); the runtime crashes it next."""
        self._row(node, ERROR, time_ns, None, None, None, detail, None, where, None, None, None, None, None, None,
                  None, None, None, None)

    def verdict(self, node: str, time_ns: int, check: str, verdict: str, clause: str | None,
                detail: str | None) -> None:
        """The verdict of a check or a conformance case."""
        self._row(node, VERDICT, time_ns, None, None, None, detail, None, check, None, None, None, None, None, None,
                  None, verdict, clause, None)

    def _row(self, *values: Any) -> None:
        """One row in ROW_COLUMNS order."""
        flat = self._flat
        flat += values
        if len(flat) >= self._flush_at:
            self.flush()

    def defer_flushes(self) -> None:
        """Write row groups only when asked (`flush_due`), never as a row fills one. A live
        runtime asks between two turns of its loop: written inside a node's handler, a full group
        (about 100 ms) was taken for the node's own time."""
        self._flush_at = sys.maxsize

    def flush_due(self) -> None:
        """Write a row group if one is full."""
        if len(self._flat) >= self._group_at:
            self.flush()

    def flush(self) -> None:
        flat = self._flat
        if not flat:
            if self._writer is None:
                self._open()
            return
        n = len(flat) // ROW_WIDTH
        self._flat = []
        by_name = {name: flat[i::ROW_WIDTH] for i, name in enumerate(ROW_COLUMNS)}
        del flat
        # node, and what follows from it (role, implementation) or from the run (run, scenario,
        # protocol), go to the writer dictionary-encoded: a node name is hashed once per row
        # group here, role and implementation are looked up once per node, and the writer
        # writes the dictionaries as they are instead of hashing every row's value again.
        import pyarrow.compute as pc

        node = pc.dictionary_encode(pa.array(by_name["node"], pa.string()))
        per_node = [self._nodes.get(k, ("", "")) for k in node.dictionary.to_pylist()]
        first = pa.repeat(pa.scalar(0, pa.int32()), n)
        arrays = []
        for name in COLUMNS:
            if name in _RUN_TEXT:
                arrays.append(pa.DictionaryArray.from_arrays(first, pa.array([getattr(self.info, name)], pa.string())))
            elif name == "seed":
                arrays.append(pa.repeat(pa.scalar(self.info.seed, pa.int64()), n))
            elif name == "node":
                arrays.append(node)
            elif name == "role":
                arrays.append(_through(node.indices, [r for r, _ in per_node]))
            elif name == "implementation":
                arrays.append(_through(node.indices, [i for _, i in per_node]))
            else:
                arrays.append(pa.array(by_name[name], SCHEMA.field(name).type))
        table = pa.Table.from_arrays(arrays, schema=_WRITE_SCHEMA)
        if self._writer is None:
            self._open()
        assert self._writer is not None
        self._writer.write_table(table)
        self.rows_written += n

    def _open(self) -> None:
        # store_schema=False: the Arrow schema in the file would name the dictionary types the
        # writer was given; without it every reader gets the Parquet types, which are SCHEMA's.
        self._writer = pq.ParquetWriter(self.path, _WRITE_SCHEMA, compression="snappy",
                                        use_dictionary=DICTIONARY_COLUMNS, write_statistics=STATISTICS_COLUMNS,
                                        store_schema=False)

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        if self._writer is not None:
            self._writer.close()
        self.closed = True

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def meta_columns(meta: dict[str, Any]) -> tuple[str | None, int | None, int | None, int | None, str | None]:
    """The topic / seq / term / index / corr columns from a Send's ``meta``, a command's
    request or a delivery's data (ints stay ints, text and bytes become text, the rest null)."""
    get = meta.get
    topic, seq, term, index, corr = get("topic"), get("seq"), get("term"), get("index"), get("corr")
    # Fast path: the usual types pass straight through.
    if topic is not None and topic.__class__ is not str:
        topic = _text(topic)
    if seq is not None and seq.__class__ is not int:
        seq = _int(seq)
    if term is not None and term.__class__ is not int:
        term = _int(term)
    if index is not None and index.__class__ is not int:
        index = _int(index)
    if corr is not None and corr.__class__ is not str:
        corr = _text(corr)
    return topic, seq, term, index, corr


def read_trace(path: str) -> pa.Table:
    """Read one trace file (or a directory of them) with the trace schema."""
    return pq.read_table(path, schema=SCHEMA)
