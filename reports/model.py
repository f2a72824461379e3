"""Turn the job's small results into report.json: tables of plain rows, histograms merged per
table key, percentiles computed from them (reports.histogram)."""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from reports.histogram import ALPHA, GAMMA, Histogram
from reports.job import JobResult
from reports.run_scan import HISTOGRAM_SCHEMA
from reports.messages import DELIVERED, DROPPED, FAULT_BITS, LOST, NO_ID, ORPHAN, OTHER_FAULT_BIT, RECEIVED, WALL
from reports.windows import END, is_point_event

REPORT_VERSION = 2  # 2: rows carry "clock" (virtual: simulated runs; wall: live and conformance runs)
UNKNOWN = "?"


def fault_label(bits: int) -> str:
    """Per-message faults as a label: 'none', 'delay', 'delay+duplicate', ..."""
    names = [name for name, bit in FAULT_BITS if bits & bit]
    if bits & OTHER_FAULT_BIT:
        names.append("other")
    return "+".join(names) or "none"


class _Rows:
    """The job's histogram rows (an Arrow table) with names filled in, summed per table key."""

    def __init__(self, job: JobResult) -> None:
        t = job.histogram
        if t is None or t.num_rows == 0:
            t = pa.Table.from_pylist([], schema=HISTOGRAM_SCHEMA)
        fb = pc.fill_null(t["fb"], 0)
        labels = {b: fault_label(b) for b in pc.unique(fb).to_pylist()}
        self.table = t.drop_columns(["fb"]).append_column(
            "fault", pa.array([labels[b] for b in fb.to_pylist()], pa.string()) if len(labels) > 1
            else pa.nulls(t.num_rows, pa.string()).fill_null(next(iter(labels.values()), "none")))
        for name in ("protocol", "scenario", "clock", "mt"):
            self.table = self.table.set_column(self.table.schema.get_field_index(name), name,
                                               pc.fill_null(self.table[name], UNKNOWN))

    def _select(self, e2e: bool, received: bool | None = None) -> pa.Table:
        mask = pc.equal(self.table["e"], e2e)
        if received:
            mask = pc.and_(mask, pc.equal(self.table["status"], RECEIVED))
        return self.table.filter(mask)

    def latency(self, e2e: bool, keys: tuple[str, ...]) -> dict[tuple, Histogram]:
        g = self._select(e2e, True).group_by(list(keys) + ["b"], use_threads=False).aggregate(
            [("n", "sum"), ("lo", "min"), ("hi", "max"), ("total", "sum")])
        out: dict[tuple, Histogram] = defaultdict(Histogram)
        cols = [g[k].to_pylist() for k in keys]
        for i, (b, n, lo, hi, total) in enumerate(zip(*(g[c].to_pylist() for c in ("b", "n_sum", "lo_min", "hi_max",
                                                                                      "total_sum")))):
            out[tuple(c[i] for c in cols)].add(b, n, lo, hi, total or 0.0)
        return out

    def counts(self, e2e: bool, keys: tuple[str, ...]) -> dict[tuple, dict[str, int]]:
        g = self._select(e2e).group_by(list(keys) + ["status"], use_threads=False).aggregate(
            [("n", "sum"), ("drops", "sum")])
        out: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for r in g.to_pylist():
            c = out[tuple(r[k] for k in keys)]
            c[r["status"]] += r["n_sum"]
            c["drop_rows"] += r["drops_sum"] or 0
        return out

    def unnamed_receipts(self) -> int:
        return pc.sum(self.table.filter(pc.equal(self.table["protocol"], UNKNOWN))["n"]).as_py() or 0


RECEIVER_NAMES = ("clock", "protocol", "scenario", "command", "node", "delivery", "topic")


def _receivers(job: JobResult) -> dict[tuple, Histogram]:
    """End-to-end latency per (clock, protocol, scenario, command, receiving node, delivery kind,
    topic): "" for a delivery that names no topic."""
    out: dict[tuple, Histogram] = defaultdict(Histogram)
    if job.receivers is None:
        return out
    for r in job.receivers.to_pylist():
        key = (*(r[k] if r[k] is not None else UNKNOWN for k in RECEIVER_NAMES[:-1]), r["topic"] or "")
        out[key].add(r["b"], r["n"], r["lo"], r["hi"], r["total"] or 0.0)
    return out


def _table(hists: dict[tuple, Histogram], names: tuple[str, ...]) -> list[dict]:
    return [{**dict(zip(names, k)), **h.summary()} for k, h in sorted(hists.items())]


def _delivery(counts: dict[tuple, dict[str, int]], names: tuple[str, ...], e2e: bool) -> list[dict]:
    out = []
    for k, c in sorted(counts.items()):
        sent = c[DELIVERED] + c[DROPPED] + c[LOST]
        row = {**dict(zip(names, k)), ("commands" if e2e else "sent"): sent,
               ("answered" if e2e else "delivered"): c[DELIVERED],
               ("deliveries" if e2e else "receptions"): c[RECEIVED]}
        if not e2e:
            row.update(dropped=c[DROPPED], lost=c[LOST], drop_rows=c["drop_rows"])
        else:
            row.update(unanswered=c[DROPPED] + c[LOST])
        row.update(orphans=c[ORPHAN], unpaired=c[NO_ID])
        out.append(row)
    return out


def _correlated(requests: list[dict]) -> tuple[list[dict], list[dict]]:
    """Requests proper, and the command/delivery types none of whose rows carries a correlation
    id (the conformance conductor's own rows, a workload that stamps none): those are not
    requests that went unanswered, so they are listed apart, counted."""
    paired, apart = [], []
    for r in requests:
        if r["commands"] or r["deliveries"] or r["orphans"]:
            paired.append(r)
        else:
            apart.append({k: r[k] for k in ("clock", "protocol", "scenario", "command")} | {"rows": r["unpaired"]})
    return paired, apart


def _chaos(job: JobResult) -> dict[str, Any]:
    runs: dict[str, dict] = {}
    for r in job.control.chaos_runs:
        run = runs.setdefault(r["run"], {"clock": r["clock"], "protocol": r["protocol"], "scenario": r["scenario"],
                                         "seed": r["seed"], "run": r["run"], "checks": {}})
        run["checks"][r["check"]] = r["verdict"]
    for run in runs.values():
        run["ok"] = all(v in ("pass", "skipped") for v in run["checks"].values())
    ordered = sorted(runs.values(), key=lambda r: (r["clock"], r["protocol"] or "", r["scenario"] or "", r["seed"] or 0,
                                                   r["run"]))
    summary = [{**s, "status": "fail" if (s["fail"] or s["error"]) else "pass" if s["pass"] or not s["skipped"]
                else "skipped"} for s in job.control.chaos_summary]
    return {"summary": summary, "runs": ordered}


def _conformance(job: JobResult) -> list[dict]:
    out = []
    for c in job.control.conformance:
        status = "fail" if c["fail"] else "error" if c["error"] else "pass" if c["pass"] else "skipped"
        out.append({**c, "status": status})
    return out


def _windows(job: JobResult) -> list[dict]:
    """How often and how long each window label was in force, per scenario."""
    acc: dict[tuple, dict] = {}
    for s in job.segments:
        protocol, scenario, clock = job.control.event_meta.get(s.run, (UNKNOWN, UNKNOWN, UNKNOWN))
        a = acc.setdefault((clock, protocol, scenario, s.label), {"runs": set(), "segments": 0, "total_ns": 0,
                                                                  "open": 0})
        a["runs"].add(s.run)
        a["segments"] += 1
        if s.end == END:
            a["open"] += 1
        else:
            a["total_ns"] += s.end - s.start
    return [{"clock": c, "protocol": p, "scenario": sc, "window": w, "runs": len(a["runs"]), "segments": a["segments"],
             "closed_total_ns": a["total_ns"], "open_at_end": a["open"]} for (c, p, sc, w), a in sorted(acc.items())]


def _point_faults(job: JobResult) -> list[dict]:
    acc: dict[tuple, int] = defaultdict(int)
    for e in job.control.events:
        if is_point_event(e):
            protocol, scenario, clock = job.control.event_meta.get(e.run, (UNKNOWN, UNKNOWN, UNKNOWN))
            acc[(clock, protocol, scenario, e.fault or UNKNOWN)] += 1
    return [{"clock": c, "protocol": p, "scenario": s, "fault": f, "count": n} for (c, p, s, f), n in sorted(acc.items())]


def _plots(rows: _Rows) -> dict[str, list]:
    """(bucket key, count) per (clock, protocol, msg_type) for the latency plots."""
    hists = rows.latency(False, ("clock", "protocol", "mt"))
    return {f"{c}/{p}/{m}": h.keys_counts() for (c, p, m), h in sorted(hists.items())}


def build(job: JobResult, source: str, master: str, seconds: float, spark_version: str,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    rows = _Rows(job)
    by_type = ("clock", "protocol", "msg_type")
    lat = {
        "by_msg_type": _table(rows.latency(False, ("clock", "protocol", "mt")), by_type),
        "by_fault_window": _table(rows.latency(False, ("clock", "protocol", "scenario", "window")),
                                  ("clock", "protocol", "scenario", "window")),
        "by_fault_window_and_msg_type": _table(
            rows.latency(False, ("clock", "protocol", "scenario", "window", "mt")),
            ("clock", "protocol", "scenario", "window", "msg_type")),
        "by_message_fault": _table(rows.latency(False, ("clock", "protocol", "mt", "fault")),
                                   ("clock", "protocol", "msg_type", "fault")),
        "end_to_end": _table(rows.latency(True, ("clock", "protocol", "scenario", "mt")),
                             ("clock", "protocol", "scenario", "command")),
        "end_to_end_by_fault_window": _table(
            rows.latency(True, ("clock", "protocol", "scenario", "window")),
            ("clock", "protocol", "scenario", "window")),
        "end_to_end_by_receiver": _table(_receivers(job), RECEIVER_NAMES),
    }
    delivery = _delivery(rows.counts(False, ("clock", "protocol", "mt")), by_type, False)
    requests, uncorrelated = _correlated(_delivery(rows.counts(True, ("clock", "protocol", "scenario", "mt")),
                                                   ("clock", "protocol", "scenario", "command"), True))
    quality = {
        "orphan_receptions": sum(d["orphans"] for d in delivery),
        # simulated message rows all carry a msg_id: one without is a problem of the trace
        "unpaired_message_rows": sum(d["unpaired"] for d in delivery if d["clock"] != WALL),
        # live message rows carry none (real sockets carry no harness id): counted, not paired
        "live_message_rows_not_paired": sum(d["unpaired"] for d in delivery if d["clock"] == WALL),
        "orphan_deliveries": sum(d["orphans"] for d in requests),
        "unpaired_request_rows": sum(d["unpaired"] for d in requests),
        # operations that never carry a correlation id: listed apart, not requests that went unpaired
        "uncorrelated_rows": sum(d["rows"] for d in uncorrelated),
        "runs_without_verdicts": sum(r["runs"] - r["runs_with_verdicts"] for r in job.control.runs),
        "receipts_of_unnamed_scenarios": rows.unnamed_receipts(),
        "unreadable_files": len(job.unreadable),
    }
    return {
        "version": REPORT_VERSION,
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "spark": {"master": master, "version": spark_version, "seconds": round(seconds, 3), "engine": job.engine,
                  "files": job.files, "rows": job.rows, "files_by_sql": job.files_by_sql},
        "runs": sorted(({"clock": r["clock"], "protocol": r["protocol"], "scenario": r["scenario"], "runs": r["runs"],
                         "runs_with_verdicts": r["runs_with_verdicts"]} for r in job.control.runs),
                       key=lambda r: (r["clock"], r["protocol"] or "", r["scenario"] or "")),
        "chaos": _chaos(job),
        "conformance": _conformance(job),
        "failures": job.control.failures,
        "latency": lat,
        "latency_method": {
            "unit": "ns",
            "percentile": "nearest rank: the value of rank ceil(q*n) in sorted order",
            "relative_error": ALPHA,
            "gamma": GAMMA,
            "exact": ["count", "min", "max", "mean"],
        },
        "histograms": _plots(rows),
        "delivery": delivery,
        "requests": requests,
        "uncorrelated": uncorrelated,
        "fault_windows": _windows(job),
        "fault_events": _point_faults(job),
        "discards": job.control.discards,
        "data_quality": quality,
        "unreadable_files": job.unreadable,
        **(extra or {}),
    }


def iter_tables(report: dict[str, Any]) -> Iterable[tuple[str, list[dict]]]:
    """(path, rows) of every table in the report, in the order the HTML shows them."""
    yield "chaos.summary", report["chaos"]["summary"]
    yield "conformance", report["conformance"]
    for name, rows in report["latency"].items():
        yield f"latency.{name}", rows
    yield "delivery", report["delivery"]
    yield "requests", report["requests"]
    yield "uncorrelated", report["uncorrelated"]
    yield "fault_windows", report["fault_windows"]
    yield "fault_events", report["fault_events"]
    yield "discards", report["discards"]
    yield "failures", report["failures"]
    yield "runs", report["runs"]
