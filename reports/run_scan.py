"""The per-run scan: everything the report needs from a trace file, in one read, in Arrow.

The harness writes one file per run, so a run's control rows, its fault windows and the pairing
of every message's send with its receipts can all be computed from its own file. Spark hands
each task a share of the files (reports.job); the task reads them with pyarrow — only the columns
it needs, strings as dictionaries — in *units* of whole files (about ``unit_rows`` rows), pairs
messages with one hash aggregation per unit and returns a latency histogram (a few hundred rows)
and the unit's control rows. Nothing is shuffled: only histograms leave a task.

The pairing is the same as the SQL engine's (reports.messages; tests hold the two to the same
report): a message is (run, send/recv or command/deliver pairing, msg_id or corr); its send time,
first and last receipt, receipt/drop counts, fault bits and type fold into one row; a message with
three receipts or more (PUB/SUB fan-out) has every receipt timed through a join of its receipts.
Statuses, windows and buckets as in reports.messages, reports.windows and reports.histogram.

What a unit cannot do alone is left to the SQL engine by reports.job: runs found in more than one
unit (a run split over files) and files of more than ``max_file_rows`` rows (a unit's memory grows
with its files; the SQL engine's does not). For those a task only reports which runs they hold.

reports.job ships this module and reports.windows to executors by value, so a Spark cluster needs
pyarrow and no zmq-harness installation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.trace import CRASH, DISCARD, FAULT, PAUSE, RESTART, RESUME, VERDICT
from reports.histogram import LOG_GAMMA, NEG_BASE
from reports.messages import (
    DELIVERED, DROPPED, FAULT_BITS, FAULT_ROW, LOST, NO_ID, ORPHAN, OTHER_FAULT_BIT, RECEIVE_SIDE, RECEIVED,
    SEND_SIDE, STATUS, STATUSES, VIRTUAL, WALL, WALL_CLOCK_MARK,
)
from reports.messages import KIND_CODES as MESSAGE_KIND_CODES
from reports.windows import NONE, Event, Segment, segments

# Only values are taken from the modules above (pickled with the task), no function or class: an
# executor imports reports.windows (shipped too) and pyarrow, nothing else of the project.

# Kinds as small codes: the message kinds as in reports.messages (side in the low two bits, +4 for
# the command/deliver pairing), control rows 8.
CONTROL = 8
KIND_CODES = {**MESSAGE_KIND_CODES, **{k: CONTROL for k in (VERDICT, CRASH, RESTART, PAUSE, RESUME, DISCARD)}}
EVENT_KINDS = (CRASH, RESTART, PAUSE, RESUME, FAULT)  # control rows that open/close windows

MESSAGE_COLUMNS = ("run", "protocol", "scenario", "kind", "time_ns", "msg_type", "msg_id", "corr", "fault")
CONTROL_COLUMNS = ("seed", "implementation", "node", "role", "verdict", "clause", "detail")  # + the above
RECEIVER_COLUMNS = ("topic",)  # + node: who got a delivery, on which topic or channel
DICTIONARY_COLUMNS = ("run", "protocol", "scenario", "kind", "msg_type", "corr", "fault", "implementation",
                      "node", "role", "verdict", "clause", "topic")
HISTOGRAM_KEYS = ("protocol", "scenario", "clock", "e", "mt", "window", "fb", "status", "b")
# what every engine returns: counts and min/max/sum of latency (ns) per histogram key
HISTOGRAM_SCHEMA = pa.schema([("protocol", pa.string()), ("scenario", pa.string()), ("clock", pa.string()),
                              ("e", pa.bool_()),
                              ("mt", pa.string()), ("window", pa.string()), ("fb", pa.int64()),
                              ("status", pa.string()), ("b", pa.int64()), ("n", pa.int64()), ("lo", pa.int64()),
                              ("hi", pa.int64()), ("total", pa.float64()), ("drops", pa.int64())])
# end-to-end latency per receiver: command -> each delivery with its corr, by the node that
# delivered, the delivery's kind and its topic (a PPPP subscriber's channel); both engines
RECEIVER_KEYS = ("protocol", "scenario", "clock", "command", "node", "delivery", "topic", "b")
RECEIVER_SCHEMA = pa.schema([*((k, pa.string()) for k in RECEIVER_KEYS[:-1]), ("b", pa.int64()), ("n", pa.int64()),
                             ("lo", pa.int64()), ("hi", pa.int64()), ("total", pa.float64())])
UNIT_ROWS = 65536
MAX_FILE_ROWS = 2_000_000  # < 2**21: see COUNT_BITS
BATCH_ROWS = 1 << 16

I64, I32, I8 = pa.int64(), pa.int32(), pa.int8()

def clock_of(run: str | None) -> str:
    return WALL if run is not None and WALL_CLOCK_MARK in run else VIRTUAL


@dataclass
class UnitResult:
    """What one unit of files gave: its histogram (named rows) and control rows, or — for a file
    left to the SQL engine — only the runs it holds."""

    files: list[int]  # indexes into the job's sorted file list
    runs: dict[int, set[str]]  # file index -> the runs it holds
    rows: int = 0
    histogram: pa.Table | None = None
    receivers: pa.Table | None = None  # RECEIVER_SCHEMA
    control: list[dict] = field(default_factory=list)
    deferred: bool = False  # the SQL engine takes these files
    error: str | None = None  # the file could not be read as a trace: why


class _Names:
    """Strings of one unit as small ints: the same string has the same id in every file."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.names: list[Any] = []

    def id(self, name: Any) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(name)
        return i

    def of(self, arr: pa.Array) -> pa.Array:
        """int32 id per element (null stays null)."""
        d = _dictionary(arr)
        return pa.array([self.id(v) for v in d.dictionary.to_pylist()], I32).take(d.indices)


def _one_chunk(c: pa.ChunkedArray) -> pa.Array:
    return c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()  # combining one chunk would copy it


def _as(arr: pa.Array, type_: pa.DataType) -> pa.Array:
    """A cast without the range check: every cast here is of values known to fit."""
    return pc.cast(arr, type_, safe=False)


def _dictionary(arr: pa.Array) -> pa.DictionaryArray:
    return arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)


def _lookup(arr: pa.Array, fn: Any, type_: pa.DataType) -> pa.Array:
    """fn applied to each distinct value (through the dictionary), not to each row."""
    d = _dictionary(arr)
    return pa.array([fn(v) for v in d.dictionary.to_pylist()], type_).take(d.indices)


def fault_bit(fault: str | None) -> int:
    if fault is None:
        return 0
    for name, bit in FAULT_BITS:
        if fault.startswith(name):
            return bit
    return OTHER_FAULT_BIT


class _Unit:
    """Rows of a unit of whole files, gathered file by file as small-int columns. Each run is in
    one file (reports.job sends runs split over files to the SQL engine), so ids that are only
    unique within a file (a corr's dictionary index) still name one message."""

    def __init__(self) -> None:
        self.runs, self.ps, self.types = _Names(), _Names(), _Names()
        self.nodes, self.topics = _Names(), _Names()
        self.deliveries: list[pa.Table] = []  # deliver rows with a corr: (run, id, t, node, kind, topic)
        self.run_ps: dict[int, int] | None = {}  # run id -> its (protocol, scenario, clock) id, while unique
        self.tables: list[pa.Table] = []
        self.control: list[dict] = []
        self.files: list[int] = []
        self.runs_by_file: dict[int, set[str]] = {}
        self.rows = 0

    def add_file(self, t: pa.Table, file_index: int) -> None:
        """One whole file (its columns unified to one dictionary each)."""
        ordinal = len(self.files)
        self.files.append(file_index)
        self.rows += t.num_rows
        col = {name: _one_chunk(t.column(name)) for name in MESSAGE_COLUMNS}
        run = _dictionary(col["run"])
        self.runs_by_file[file_index] = {r for r in run.dictionary.to_pylist() if r is not None}
        kc = _lookup(col["kind"], lambda k: KIND_CODES.get(k, -1), I8)
        msg_id = col["msg_id"]
        ctl = pc.fill_null(pc.or_(pc.equal(kc, CONTROL), pc.and_(pc.equal(kc, FAULT_ROW), pc.is_null(msg_id))), False)
        if pc.any(ctl).as_py():
            self._add_control(t.filter(ctl), pc.indices_nonzero(ctl), file_index)
        keep = pc.and_(pc.less(kc, CONTROL), pc.and_(pc.greater_equal(kc, 0), pc.invert(ctl)))
        e = pc.greater_equal(kc, 4)
        corr = pc.bit_wise_or(_as(_dictionary(col["corr"]).indices, I64), ordinal << 32)  # unique in the unit
        run_id = self.runs.of(run)
        ps = self._pairs(col["protocol"], col["scenario"], run)
        self._note_run_ps(run_id, ps)
        delivered = pc.fill_null(pc.and_(pc.equal(kc, 4 + RECEIVE_SIDE), pc.is_valid(col["corr"])), False)
        if pc.any(delivered).as_py():
            self.deliveries.append(pa.table({
                "run": run_id, "id": corr, "t": col["time_ns"], "node": self.nodes.of(_one_chunk(t.column("node"))),
                "kind": self.types.of(col["msg_type"]), "topic": self.topics.of(_one_chunk(t.column("topic"))),
            }).filter(delivered))
        self.tables.append(pa.table({
            "run": run_id, "e": e, "id": pc.if_else(e, corr, msg_id),
            "k": pc.bit_wise_and(kc, 3), "t": col["time_ns"], "mt": self.types.of(col["msg_type"]), "ps": ps,
            "fb": pc.if_else(pc.equal(kc, FAULT_ROW), _lookup(col["fault"], fault_bit, I8), pa.scalar(0, I8)),
        }).filter(keep))

    def _note_run_ps(self, run_id: pa.Array, ps: pa.Array) -> None:
        """Track run -> (protocol, scenario, clock): when every run has one, the pairing need not carry it."""
        if self.run_ps is None:
            return
        pairs = pc.unique(pc.add(pc.multiply(_as(pc.fill_null(run_id, -1), I64), 1 << 31), _as(ps, I64)))
        for code in pairs.to_pylist():
            r, p = divmod(code, 1 << 31)
            if self.run_ps.setdefault(r, p) != p:
                self.run_ps = None  # a run with two names: let the pairing aggregate them
                return

    def _pairs(self, protocol: pa.Array, scenario: pa.Array, run: pa.DictionaryArray) -> pa.Array:
        """One id per (protocol, scenario, clock): the two dictionary indices (+1, null as 0) and
        the run's clock make one code per row, and only the distinct codes are named in Python."""
        p, s = _dictionary(protocol), _dictionary(scenario)
        clocks = [clock_of(r) for r in run.dictionary.to_pylist()]
        if len(p.dictionary) == len(s.dictionary) == 1 and not p.null_count and not s.null_count \
                and len(set(clocks)) == 1:  # one run
            key = (p.dictionary[0].as_py(), s.dictionary[0].as_py(), clocks[0])
            return _filled(len(p), self.ps.id(key), I32)
        pn, sn = [None] + p.dictionary.to_pylist(), [None] + s.dictionary.to_pylist()
        code = pc.add(pc.multiply(_as(pc.fill_null(p.indices, -1), I64), len(sn)),
                      _as(pc.fill_null(s.indices, -1), I64))
        code = pc.add(code, len(sn) + 1)  # = (p + 1) * len(sn) + (s + 1)
        wall = pa.array([c == WALL for c in clocks] or [False], pa.bool_()).take(pc.fill_null(run.indices, 0))
        code = pc.add(pc.multiply(code, 2), _as(wall, I64))
        uniq = pc.unique(code)
        ids = [self.ps.id((pn[(c // 2) // len(sn)], sn[(c // 2) % len(sn)], WALL if c % 2 else VIRTUAL))
               for c in uniq.to_pylist()]
        return pa.array(ids, I32).take(pc.index_in(code, uniq))

    def _add_control(self, rows: pa.Table, where: pa.Array, file_index: int) -> None:
        for r, i in zip(rows.to_pylist(), where.to_pylist()):
            r["order"] = (file_index << 32) | i  # scan order breaks ties at equal times
            if r["kind"] == "verdict" and r["verdict"] == "pass":
                r["detail"] = None  # the report keeps evidence of failures only
            self.control.append(r)

    def finish(self) -> UnitResult:
        result = UnitResult(self.files, self.runs_by_file, self.rows, control=self.control)
        events = [Event(r["run"], r.get("time_ns") or 0, r["order"], r["kind"], r.get("node"), r.get("fault"),
                        r.get("detail")) for r in self.control if r.get("kind") in EVENT_KINDS]
        segs = segments(events)
        m = pa.concat_tables(self.tables) if self.tables else None
        if m is not None and m.num_rows:
            result.histogram, result.receivers = _histogram(m, segs, self)
        return result


def _labels(run: pa.Array, t: pa.Array, segs: list[Segment], unit: _Unit, labels: list[str]) -> pa.Array:
    """The window label id in force at time t of each row's run (0: none)."""
    wl = _zeros(len(run), I32)
    for s in segs:
        rid = unit.runs.ids.get(s.run)
        if rid is None:
            continue
        inside = pc.and_(pc.equal(run, rid), pc.and_(pc.greater_equal(t, s.start), pc.less(t, s.end)))
        wl = pc.if_else(inside, labels.index(s.label), wl)
    return pc.fill_null(wl, 0)


def _group(t: pa.Table, keys: list[str], aggs: list[tuple[str, str]]) -> pa.Table:
    """group_by on non-negative int key columns, packed into one int64 when their values fit
    (a hash aggregation on one int64 is several times faster than on several columns). Returns
    the key columns and the aggregates named "<column>_<function>"."""
    widths = []
    for k in keys:
        lo, hi = pc.min_max(t[k]).values()
        if lo.as_py() is not None and lo.as_py() < 0:
            widths = []
            break
        widths.append(max(1, int(hi.as_py() or 0).bit_length()))
    if not widths or sum(widths) > 62:
        g = t.group_by(keys, use_threads=False).aggregate(aggs)
        return g
    packed, shift = None, 0
    for k, w in zip(keys, widths):
        v = pc.shift_left(_as(t[k], I64), shift) if shift else _as(t[k], I64)
        packed = v if packed is None else pc.bit_wise_or(packed, v)
        shift += w
    g = t.append_column("_key", packed).group_by(["_key"], use_threads=False).aggregate(aggs)
    key, shift, cols = g["_key"], 0, {}
    for k, w in zip(keys, widths):
        cols[k] = _as(pc.bit_wise_and(pc.shift_right(key, shift), (1 << w) - 1), t.schema.field(k).type)
        shift += w
    return pa.table({**cols, **{c: g[c] for c in g.column_names if c != "_key"}})


# packed receipt counts: sends, receipts and drops of one message in 21 bits each (files bigger
# than MAX_FILE_ROWS < 2**21 rows go to the SQL engine, so no count can overflow its field)
COUNT_BITS = 21
COUNT_OF_KIND = pa.array([1, 1 << COUNT_BITS, 1 << (2 * COUNT_BITS), 0], I64)  # by k: send, recv, drop, fault
MT_RECEIPT = 1 << 31  # message type of a non-send row, biased so that min() prefers the send's
FAULT_COUNT_BITS = 15
# fault bits (1, 2, 4, 8) -> a count of 1 in each one's field of the packed sum
FAULT_COUNT_OF_BITS = pa.array([sum(1 << (i * FAULT_COUNT_BITS) for i in range(4) if b & (1 << i))
                                for b in range(16)], I64)


def _histogram(m: pa.Table, segs: list[Segment], unit: _Unit) -> tuple[pa.Table, pa.Table | None]:
    """Counts per (pair, e2e, type, window, fault bits, status, bucket) with min/max/sum of latency,
    and the end-to-end receipts per receiver (RECEIVER_SCHEMA; None without any)."""
    labels = [NONE] + sorted({s.label for s in segs})
    k = m["k"]
    paired = pc.is_valid(m["id"])
    fates: list[pa.Table] = []  # rows counted by status

    if not pc.all(paired).as_py():
        # rows without an id (no msg_id / corr) cannot be paired: each send or receipt counts alone
        lone = m.filter(pc.and_(pc.invert(paired), pc.less_equal(k, RECEIVE_SIDE)))
        if lone.num_rows:
            wl = _labels(lone["run"], lone["t"], segs, unit, labels) if segs else _zeros(lone.num_rows, I32)
            wl = pc.if_else(pc.equal(lone["k"], SEND_SIDE), wl, 0)
            fates.append(_keyed(lone["ps"], lone["e"], lone["mt"], wl, lone["fb"],
                                status=_filled(lone.num_rows, STATUS[NO_ID], I8), w=_ones(lone.num_rows),
                                nd=_zeros(lone.num_rows)))
        m = m.filter(paired)
        k = m["k"]
    t = m["t"]
    xs, xr = pc.equal(k, SEND_SIDE), pc.equal(k, RECEIVE_SIDE)
    e8 = _as(m["e"], I8)
    cols = {"run": m["run"], "e": e8, "id": m["id"], "ts": pc.if_else(xs, t, None), "tr": pc.if_else(xr, t, None),
            "c": COUNT_OF_KIND.take(k),
            "mtk": pc.if_else(xs, _as(m["mt"], I64), pc.add(_as(m["mt"], I64), MT_RECEIPT))}
    aggs = [("ts", "min"), ("tr", "min"), ("tr", "max"), ("c", "sum"), ("mtk", "min")]
    # fault bits: OR over the message's fault rows, as per-bit counts packed in one sum when no
    # count can overflow its field (fewer fault rows than 2**FAULT_COUNT_BITS), else per-bit max
    packed_faults = pc.sum(pc.equal(k, FAULT_ROW)).as_py() or 0
    packed_faults = packed_faults < (1 << FAULT_COUNT_BITS)
    if packed_faults:
        cols["cf"] = FAULT_COUNT_OF_BITS.take(_as(m["fb"], I64))
        aggs.append(("cf", "sum"))
    else:
        cols.update({f"f{bit}": pc.bit_wise_and(m["fb"], bit) for bit in (1, 2, 4, 8)})
        aggs += [(f"f{bit}", "max") for bit in (1, 2, 4, 8)]
    if unit.run_ps is None:
        cols["ps"] = m["ps"]
        aggs.append(("ps", "min"))
    g = _group(pa.table(cols), ["run", "e", "id"], aggs)
    c = g["c_sum"]
    mask = (1 << COUNT_BITS) - 1
    ns = pc.bit_wise_and(c, mask)
    nr = pc.bit_wise_and(pc.shift_right(c, COUNT_BITS), mask)
    nd = pc.shift_right(c, 2 * COUNT_BITS)
    t0 = g["ts_min"]
    if packed_faults:
        cf, bits = g["cf_sum"], _zeros(len(g), I64)
        for i, bit in enumerate((1, 2, 4, 8)):
            has = pc.greater(pc.bit_wise_and(pc.shift_right(cf, i * FAULT_COUNT_BITS), (1 << FAULT_COUNT_BITS) - 1), 0)
            bits = pc.if_else(has, pc.bit_wise_or(bits, bit), bits)
    else:
        bits = g["f1_max"]
        for bit in (2, 4, 8):
            bits = pc.bit_wise_or(bits, g[f"f{bit}_max"])
    if unit.run_ps is None:
        ps = g["ps_min"]
    else:
        runs = unit.run_ps
        ps = pa.array([runs.get(i, 0) for i in range(len(unit.runs.names))], I32).take(g["run"])
    mtk = g["mtk_min"]
    mt = _as(pc.if_else(pc.greater_equal(mtk, MT_RECEIPT), pc.subtract(mtk, MT_RECEIPT), mtk), I32)
    has_send = pc.greater(ns, 0)
    wl = _labels(g["run"], t0, segs, unit, labels) if segs else _zeros(len(g), I32)
    e = g["e"]
    # the message's fate: orphan receipts, or delivered / dropped / lost sends
    status = pc.if_else(pc.invert(has_send), STATUS[ORPHAN],
                        pc.if_else(pc.greater(nr, 0), STATUS[DELIVERED],
                                   pc.if_else(pc.greater(nd, 0), STATUS[DROPPED], STATUS[LOST])))
    w = pc.if_else(has_send, ns, nr)
    fates.append(_keyed(ps, e, mt, wl, bits, where=pc.greater(w, 0), status=status, w=w, nd=pc.multiply(nd, ns)))
    # receipts: the first and (when exactly two) the last from the aggregate; a fan-out (3+) by a join
    fan = pc.and_(has_send, pc.greater(nr, 2))
    simple = pc.and_(has_send, pc.invert(fan))
    receipts = [_keyed(ps, e, mt, wl, bits, where=pc.and_(simple, cond), lat=lat)
                for lat, cond in ((pc.subtract(g["tr_min"], t0), pc.greater(nr, 0)),
                                  (pc.subtract(g["tr_max"], t0), pc.equal(nr, 2)))]
    if pc.any(fan).as_py():
        keys = pa.table({"run": g["run"], "e": e, "id": g["id"], "ps": ps, "mt0": mt, "wl": wl, "fbits": bits,
                         "t0": t0}).filter(fan)
        rx = pa.table({"run": m["run"], "e": e8, "id": m["id"], "t": t}).filter(xr).join(
            keys, ["run", "e", "id"], join_type="inner", use_threads=False)
        receipts.append(_keyed(rx["ps"], rx["e"], rx["mt0"], rx["wl"], rx["fbits"],
                               lat=pc.subtract(rx["t"], rx["t0"])))
    counts = _group(pa.concat_tables(fates), list(ATTRIBUTES) + ["status"], [("w", "sum"), ("nd", "sum")])
    r = pa.concat_tables(receipts)
    r = r.append_column("b", _bucket_code(r["lat"])).append_column("latf", pc.cast(r["lat"], pa.float64(), safe=False))
    timed = _group(r, list(ATTRIBUTES) + ["b"], [([], "count_all"), ("lat", "min"), ("lat", "max"), ("latf", "sum")])
    commands = pa.table({"run": g["run"], "id": g["id"], "ps": ps, "mt0": mt, "t0": t0}).filter(
        pc.and_(pc.equal(e, 1), has_send))
    return (pa.concat_tables([_named(counts, unit, labels), _named(timed, unit, labels)]),
            _receivers(unit, commands) if unit.deliveries and commands.num_rows else None)


def _receivers(unit: _Unit, commands: pa.Table) -> pa.Table:
    """Every delivery whose command is in the run, timed from the command's first row, counted per
    (pair, command type, node, delivery kind, topic, bucket)."""
    rx = pa.concat_tables(unit.deliveries).join(commands, ["run", "id"], join_type="inner", use_threads=False)
    lat = pc.subtract(rx["t"], rx["t0"])
    # ids shifted by one where a null is possible (0: none), as _keyed does for message types
    keyed = pa.table({"ps": _as(rx["ps"], I32), "mt": pc.fill_null(pc.add(_as(rx["mt0"], I32), 1), 0),
                      "node": pc.fill_null(pc.add(rx["node"], 1), 0), "kind": pc.fill_null(pc.add(rx["kind"], 1), 0),
                      "topic": pc.fill_null(pc.add(rx["topic"], 1), 0), "b": _bucket_code(lat), "lat": lat,
                      "latf": pc.cast(lat, pa.float64(), safe=False)})
    h = _group(keyed, ["ps", "mt", "node", "kind", "topic", "b"],
               [([], "count_all"), ("lat", "min"), ("lat", "max"), ("latf", "sum")])
    pairs, types = unit.ps.names, [None] + unit.types.names
    nodes, topics = [None] + unit.nodes.names, [None] + unit.topics.names
    ps = h["ps"].to_pylist()
    return pa.table({
        "protocol": [pairs[i][0] for i in ps], "scenario": [pairs[i][1] for i in ps], "clock": [pairs[i][2] for i in ps],
        "command": [types[i] for i in h["mt"].to_pylist()], "node": [nodes[i] for i in h["node"].to_pylist()],
        "delivery": [types[i] for i in h["kind"].to_pylist()], "topic": [topics[i] for i in h["topic"].to_pylist()],
        "b": _bucket_key(_as(h["b"], I64)), "n": h["count_all"], "lo": h["lat_min"], "hi": h["lat_max"],
        "total": h["latf_sum"],
    }, schema=RECEIVER_SCHEMA)


ATTRIBUTES = ("ps", "e", "mt", "wl", "fb")  # what a histogram row is about, besides status and bucket
VALUE_TYPES = {"status": I8, "w": I64, "nd": I64, "lat": I64}


def _keyed(ps, e, mt, wl, fb, where=None, **values: Any) -> pa.Table:
    """Histogram input rows: the attributes as small non-negative ints (mt shifted by one: 0 is
    no type) and the given value columns, filtered by ``where``."""
    t = pa.table({"ps": _as(ps, I32), "e": _as(e, I8), "mt": pc.fill_null(pc.add(_as(mt, I32), 1), 0),
                  "wl": _as(wl, I32), "fb": _as(fb, I8),
                  **{k: _as(v, VALUE_TYPES[k]) for k, v in values.items()}})
    return t if where is None else t.filter(where)


def _filled(n: int, value: int, type_: pa.DataType = I64) -> pa.Array:
    return pa.nulls(n, type_).fill_null(value)


def _zeros(n: int, type_: pa.DataType = I64) -> pa.Array:
    return _filled(n, 0, type_)


def _ones(n: int) -> pa.Array:
    return _filled(n, 1)


# bucket keys as small non-negative codes for the packed group key: 0 no latency, 1 zero,
# 2 + key for positive latencies, NEG_CODE + (NEG_BASE - key) for negative ones
NEG_CODE = 1 << 12


def _bucket_code(lat: pa.Array) -> pa.Array:
    """The bucket key as a code (see NEG_CODE), computed once on |lat| for either sign."""
    f = pc.cast(lat, pa.float64(), safe=False)  # ns beyond 2**53 lose precision, not their bucket
    a = pc.abs(f)
    k = pc.ceil(pc.divide(pc.ln(pc.if_else(pc.equal(a, 0), 1.0, a)), LOG_GAMMA))
    code = pc.if_else(pc.greater(f, 0), pc.add(k, 2.0), pc.if_else(pc.equal(f, 0), 1.0, pc.add(k, float(NEG_CODE))))
    return _as(pc.fill_null(code, 0.0), I64)


def _bucket_key(code: pa.Array) -> pa.Array:
    key = pc.if_else(pc.greater_equal(code, NEG_CODE), pc.subtract(NEG_BASE, pc.subtract(code, NEG_CODE)),
                     pc.subtract(code, 2))
    return pc.if_else(pc.equal(code, 0), None, key)


def _named(h: pa.Table, unit: _Unit, labels: list[str]) -> pa.Table:
    """Ids back to names: the histogram rows every engine returns (HISTOGRAM_SCHEMA). ``h`` holds
    counts per status (w_sum, nd_sum) or timed receipts per bucket (count_all, lat_*)."""
    n = h.num_rows
    pairs = unit.ps.names
    ps = h["ps"].to_pylist()
    types = [None] + unit.types.names  # mt was shifted by one (0: no type)
    timed = "b" in h.column_names
    return pa.table({
        "protocol": pa.array([pairs[i][0] for i in ps], pa.string()),
        "scenario": pa.array([pairs[i][1] for i in ps], pa.string()),
        "clock": pa.array([pairs[i][2] for i in ps], pa.string()),
        "e": pc.cast(h["e"], pa.bool_()),
        "mt": pa.array([types[i] for i in h["mt"].to_pylist()], pa.string()),
        "window": pa.array([labels[i] for i in h["wl"].to_pylist()], pa.string()),
        "fb": _as(h["fb"], I64),
        "status": pa.array([STATUSES[i] for i in h["status"].to_pylist()], pa.string()) if not timed
        else pa.nulls(n, pa.string()).fill_null(RECEIVED),
        "b": _bucket_key(_as(h["b"], I64)) if timed else pa.nulls(n, I64),
        "n": h["count_all"] if timed else h["w_sum"],
        "lo": h["lat_min"] if timed else pa.nulls(n, I64),
        "hi": h["lat_max"] if timed else pa.nulls(n, I64),
        "total": h["latf_sum"] if timed else pa.nulls(n, pa.float64()),
        "drops": _zeros(n) if timed else h["nd_sum"],
    }).cast(HISTOGRAM_SCHEMA)


def merge_receivers(tables: Iterable[pa.Table | None]) -> pa.Table | None:
    """Receiver tables of several units summed per key."""
    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return None
    h = pa.concat_tables([t.cast(RECEIVER_SCHEMA) for t in tables]).group_by(
        list(RECEIVER_KEYS), use_threads=False).aggregate([("n", "sum"), ("lo", "min"), ("hi", "max"), ("total", "sum")])
    return pa.table({**{k: h[k] for k in RECEIVER_KEYS}, "n": h["n_sum"], "lo": h["lo_min"], "hi": h["hi_max"],
                     "total": h["total_sum"]}).cast(RECEIVER_SCHEMA)


def merge_histograms(tables: Iterable[pa.Table | None]) -> pa.Table | None:
    """Histogram tables of several units summed per key."""
    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return None
    h = pa.concat_tables([t.cast(HISTOGRAM_SCHEMA) for t in tables]).group_by(
        list(HISTOGRAM_KEYS), use_threads=False).aggregate(
        [("n", "sum"), ("lo", "min"), ("hi", "max"), ("total", "sum"), ("drops", "sum")])
    return pa.table({**{k: h[k] for k in HISTOGRAM_KEYS}, "n": h["n_sum"], "lo": h["lo_min"], "hi": h["hi_max"],
                     "total": h["total_sum"], "drops": h["drops_sum"]}).cast(HISTOGRAM_SCHEMA)


# ---- one task ---------------------------------------------------------------------------------


def _remember_missing_modules() -> None:
    """pyarrow tries `import dateutil` whenever it converts an untyped Python scalar (every
    `pc.equal(array, 3)`); when dateutil is not installed each try searches sys.path again, which
    cost a tenth of this scan. Recording the absence in sys.modules makes the import fail at once,
    as it would anyway. (Done here, not at import: on an executor this module is never imported.)"""
    import importlib.util
    import sys

    if "dateutil" not in sys.modules and importlib.util.find_spec("dateutil") is None:
        sys.modules["dateutil"] = None  # type: ignore[assignment]


def _open(uri: str) -> Any:
    """A readable file for a URI as Spark lists it (file:/..., hdfs://..., s3://...) or a path."""
    from pyarrow import fs as pafs

    if ":" not in uri.split("/", 1)[0]:
        return pafs.LocalFileSystem().open_input_file(uri)
    filesystem, path = pafs.FileSystem.from_uri(uri)
    return filesystem.open_input_file(path)


def scan_files(files: list[tuple[int, str]], unit_rows: int = UNIT_ROWS,
               max_file_rows: int = MAX_FILE_ROWS) -> Iterator[UnitResult]:
    """One task: (index, URI) pairs in, one UnitResult per unit of whole files out."""
    _remember_missing_modules()
    unit = _Unit()
    for index, uri in files:
        try:
            source = _open(uri)
            present = set(pq.read_schema(source).names)
        except Exception as e:  # one bad file must not sink the report of thousands: say which, go on
            yield UnitResult([index], {index: set()}, error=f"not a readable Parquet file ({e})")
            continue
        if "run" not in present or "kind" not in present:
            yield UnitResult([index], {index: set()}, error="not a trace file (no run/kind column)")
            continue
        pf = pq.ParquetFile(source, read_dictionary=[c for c in DICTIONARY_COLUMNS if c in present])
        rows = pf.metadata.num_rows
        if rows > max_file_rows:  # the SQL engine pairs this file; say which runs it holds
            runs: set[str] = set()
            for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=["run"]):
                runs.update(x for x in _dictionary(b.column(0)).dictionary.to_pylist() if x is not None)
            yield UnitResult([index], {index: runs}, rows, deferred=True)
            continue
        columns = [c for c in MESSAGE_COLUMNS + CONTROL_COLUMNS + RECEIVER_COLUMNS if c in present]
        unit.add_file(_complete(pf.read(columns=columns, use_threads=False).unify_dictionaries()), index)
        if unit.rows >= unit_rows:
            yield unit.finish()
            unit = _Unit()
    if unit.files:
        yield unit.finish()


@dataclass
class TaskResult:
    """One Spark task's share: its units (control rows, runs; no histogram) and their histogram
    summed — one table per task for the driver to merge, not one per unit."""

    task: int
    units: list[UnitResult]
    histogram: pa.Table | None
    receivers: pa.Table | None = None


def scan_task(task: tuple[int, list[tuple[int, str]]], skip: frozenset[int] = frozenset(),
              unit_rows: int = UNIT_ROWS, max_file_rows: int = MAX_FILE_ROWS) -> TaskResult:
    """scan_files over a task's files but those in ``skip`` (file indexes), histograms summed."""
    number, files = task
    units = list(scan_files([f for f in files if f[0] not in skip], unit_rows, max_file_rows))
    histogram = merge_histograms(u.histogram for u in units)
    receivers = merge_receivers(u.receivers for u in units)
    for u in units:
        u.histogram = u.receivers = None
    return TaskResult(number, units, histogram, receivers)


_TYPES = {"seed": I64, "time_ns": I64, "msg_id": I64}


def _complete(t: pa.Table) -> pa.Table:
    """Columns a file lacks (an older or foreign trace) as nulls."""
    for c in MESSAGE_COLUMNS + CONTROL_COLUMNS + RECEIVER_COLUMNS:
        if c not in t.column_names:
            t = t.append_column(c, pa.nulls(t.num_rows, _TYPES.get(c, pa.string())))
    return t
