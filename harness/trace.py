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
from dataclasses import dataclass
from typing import Any, Iterable

import msgpack
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# Row kinds. Free-form kinds are allowed, these are the ones the harness itself writes.
SEND, RECV, DROP, FAULT, CRASH, RESTART, PAUSE, RESUME = (
    "send", "recv", "drop", "fault", "crash", "restart", "pause", "resume",
)
DELIVER, DISCARD, NOTE, COMMAND, VERDICT = "deliver", "discard", "note", "command", "verdict"

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
        self._flush_at = row_group_rows * ROW_WIDTH
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


def read_trace(path: str) -> pa.Table:
    """Read one trace file (or a directory of them) with the trace schema."""
    return pq.read_table(path, schema=SCHEMA)
