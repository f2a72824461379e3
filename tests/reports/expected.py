"""What report.json should say, computed independently of Spark: pyarrow reads the trace files,
plain Python pairs rows and sorts every latency. Fault windows are found naively (replay every
event up to the send time) rather than by the report's sweep over segments."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.trace import read_trace

COLUMNS = ["run", "scenario", "protocol", "node", "kind", "time_ns", "msg_type", "msg_id", "corr", "fault", "detail",
           "topic"]
BITS = {"delay": 1, "duplicate": 2, "reorder": 4}


def _label(bits: int) -> str:
    names = [n for n, b in BITS.items() if bits & b] + (["other"] if bits & 8 else [])
    return "+".join(names) or "none"


def window_at(events: list[dict], ts: int) -> str:
    """The fault windows in force at ``ts``: replay the run's events (time, file order) up to it."""
    open_: dict[str, str] = {}
    for e in events:
        if e["time_ns"] > ts:
            break
        node, kind, fault, words = e["node"], e["kind"], e["fault"], (e["detail"] or "").split()
        if kind in ("crash", "restart"):
            (open_.__setitem__(f"crash:{node}", f"crash:{node}") if kind == "crash" else open_.pop(f"crash:{node}", None))
        elif kind in ("pause", "resume"):
            (open_.__setitem__(f"pause:{node}", f"pause:{node}") if kind == "pause" else open_.pop(f"pause:{node}", None))
        elif fault == "partition":
            open_[words[0]] = "partition"
        elif fault == "heal":
            for w in words:
                open_.pop(w, None)
        else:
            assert fault in ("incompatible-sockets",), f"the test traces hold no {fault} windows"
    return "+".join(sorted(set(open_.values()))) or "none"


@dataclass
class Expected:
    by_msg_type: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_fault_window: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    by_message_fault: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    end_to_end: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    end_to_end_by_fault_window: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    end_to_end_by_receiver: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    delivery: dict[tuple, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    requests: dict[tuple, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))


def compute(root: Path) -> Expected:
    runs: dict[str, list[dict]] = defaultdict(list)
    for f in sorted(root.rglob("*.parquet")):
        if "report" in f.parts:
            continue
        for i, row in enumerate(read_trace(str(f)).select(COLUMNS).to_pylist()):
            runs[row["run"]].append({**row, "order": (str(f), i)})
    out = Expected()
    for rows in runs.values():
        _run(rows, out)
    return out


def _run(rows: list[dict], out: Expected) -> None:
    # "protocol" below is (clock, protocol): a run's times are virtual in simulation and wall
    # time live (a run id with "@", harness/run_ids.py), and the report keeps the two apart
    clock = "wall" if "@" in rows[0]["run"] else "virtual"
    protocol, scenario = (clock, rows[0]["protocol"]), rows[0]["scenario"]
    events = sorted((r for r in rows if r["kind"] in ("crash", "restart", "pause", "resume")
                     or (r["kind"] == "fault" and r["msg_id"] is None)), key=lambda r: (r["time_ns"], r["order"]))
    sends: dict[int, list[dict]] = defaultdict(list)
    recvs: dict[int, list[dict]] = defaultdict(list)
    drops: dict[int, int] = defaultdict(int)
    bits: dict[int, int] = defaultdict(int)
    for r in rows:
        kind, mid = r["kind"], r["msg_id"]
        if kind in ("send", "recv") and mid is None:
            out.delivery[(*protocol, r["msg_type"] or "?")]["unpaired"] += 1
        elif kind == "send":
            sends[mid].append(r)
        elif kind == "recv":
            recvs[mid].append(r)
        elif kind == "drop" and mid is not None:
            drops[mid] += 1
        elif kind == "fault" and mid is not None:
            f = r["fault"] or ""
            bits[mid] |= next((b for n, b in BITS.items() if f.startswith(n)), 8)
    for mid, ss in sends.items():
        t0, mt = min(s["time_ns"] for s in ss), max(s["msg_type"] for s in ss)
        d = out.delivery[(*protocol, mt)]
        for _ in ss:
            d["sent"] += 1
            d["drop_rows"] += drops[mid]
            d["delivered" if recvs[mid] else "dropped" if drops[mid] else "lost"] += 1
        window = window_at(events, t0)
        for rv in recvs[mid]:
            lat = rv["time_ns"] - t0
            d["receptions"] += 1
            out.by_msg_type[(*protocol, mt)].append(lat)
            out.by_fault_window[(*protocol, scenario, window)].append(lat)
            out.by_message_fault[(*protocol, mt, _label(bits[mid]))].append(lat)
    for mid, rs in recvs.items():
        if mid not in sends:
            out.delivery[(*protocol, rs[0]["msg_type"] or "?")]["orphans"] += len(rs)
    # end to end: command -> deliver by corr
    commands: dict[str, list[dict]] = defaultdict(list)
    delivers: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["kind"] in ("command", "deliver"):
            if r["corr"] is None:
                out.requests[(*protocol, scenario, r["msg_type"] or "?")]["unpaired"] += 1
            else:
                (commands if r["kind"] == "command" else delivers)[r["corr"]].append(r)
    for corr, cs in commands.items():
        t0, op = min(c["time_ns"] for c in cs), max(c["msg_type"] for c in cs)
        q = out.requests[(*protocol, scenario, op)]
        q["commands"] += len(cs)
        q["answered" if delivers[corr] else "unanswered"] += len(cs)
        for d in delivers[corr]:
            q["deliveries"] += 1
            out.end_to_end[(*protocol, scenario, op)].append(d["time_ns"] - t0)
            out.end_to_end_by_fault_window[(*protocol, scenario, window_at(events, t0))].append(d["time_ns"] - t0)
            receiver = (d["node"], d["msg_type"] or "?", d["topic"] or "")
            out.end_to_end_by_receiver[(*protocol, scenario, op, *receiver)].append(d["time_ns"] - t0)
    for corr, ds in delivers.items():
        if corr not in commands:
            out.requests[(*protocol, scenario, ds[0]["msg_type"] or "?")]["orphans"] += len(ds)
