"""The control scan: the few rows per run that are not messages — verdicts, crash/restart,
pause/resume, discards, and `fault` rows without a msg_id (network-wide faults) — plus the
dictionary of names (protocol, scenario, message type) that the message scan only carries as
hashes. One Spark action; the verdict and fault tables are built on the driver from its output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from harness.trace import COMMAND, CRASH, DELIVER, DISCARD, FAULT, PAUSE, RESTART, RESUME, SEND, VERDICT
from reports.windows import Event

HARNESS_NODE = "harness"  # node of chaos-run verdict rows
MAX_SEEDS_LISTED = 500  # per scenario in the seed matrix (failing runs are always listed)
MAX_FAILURES_LISTED = 200  # failing verdicts with their detail
MAX_FAILING_SEEDS = 50  # per check in the summary
CONTROL_COLUMNS = ("run", "seed", "implementation", "node", "role", "kind", "time_ns", "fault", "verdict", "clause",
                   "detail")


@dataclass
class Control:
    """What the control scan found."""

    events: list[Event] = field(default_factory=list)
    event_meta: dict[str, tuple[str, str]] = field(default_factory=dict)  # run -> (protocol, scenario)
    chaos_summary: list[dict] = field(default_factory=list)
    chaos_runs: list[dict] = field(default_factory=list)
    conformance: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    discards: list[dict] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)  # per (protocol, scenario): runs with control rows
    groups: dict[int, tuple[str, str]] = field(default_factory=dict)  # xxhash64(protocol, scenario) -> names
    msg_types: dict[int, str] = field(default_factory=dict)  # xxhash64(msg_type) -> msg_type


def control_query(df):  # DataFrame -> DataFrame
    """Control rows, and one row per distinct (protocol, scenario, message type) of send, command
    and deliver rows — found by the same scan. A control row's own columns travel packed in one
    JSON string (built for those few rows only) that is null on message rows, so `distinct` on
    four columns folds the message rows to a handful while every control row stays unique."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    ctl = kind.isin(VERDICT, CRASH, RESTART, PAUSE, RESUME, DISCARD) | ((kind == FAULT) & F.col("msg_id").isNull())
    named = kind.isin(SEND, COMMAND, DELIVER)  # not recv: the bulk of the rows; receipts use their send's type
    keep_detail = (kind != VERDICT) | (F.col("verdict") != "pass")  # evidence of failures only
    packed = F.to_json(F.struct(
        *[F.col(c) for c in CONTROL_COLUMNS if c != "detail"],
        F.when(keep_detail, F.col("detail")).alias("detail"),
        # scan order breaks ties between events at the same time (crash then restart at t)
        F.monotonically_increasing_id().alias("order")), {"ignoreNullFields": "false"})
    return (
        df.filter(ctl | named)
        .select("protocol", "scenario", "msg_type", F.when(ctl, packed).alias("control"))
        .distinct()
        .withColumn("p", F.xxhash64("protocol", "scenario"))
        .withColumn("mt", F.xxhash64("msg_type"))
    )


def read_control(df, tables: "ControlTables | None" = None) -> Control:
    """Run the control query and add its rows to ``tables`` (a new one if None)."""
    tables = tables or ControlTables()
    for r in control_query(df).collect():
        row = r.asDict()
        if row["control"] is None:
            tables.add_name(row["p"], row["mt"], row["protocol"], row["scenario"], row["msg_type"])
        else:
            row.update(json.loads(row["control"]))
            tables.add(row)
    out = Control()
    tables.finish(out)
    return out


def _key(*xs: object) -> tuple:
    """Sort key that puts None last instead of failing to compare it."""
    return tuple((x is None, x) for x in xs)


def _failure_order(f: dict) -> tuple:
    return _key(f["protocol"], f["scenario"], f["seed"], f["run"], f["msg_type"])


class ControlTables:
    """Streaming aggregation of control rows into the report's verdict and fault tables."""

    def __init__(self) -> None:
        self.summary: dict[tuple, dict] = {}
        self.conf: dict[tuple, dict] = {}
        self.matrix: list[dict] = []
        self.failures: list[dict] = []
        self.discards: dict[tuple, int] = {}
        self.runs: dict[tuple, tuple[set, set]] = {}
        self.events: list[Event] = []
        self.meta: dict[str, tuple[str, str]] = {}
        self.groups: dict[int, tuple[str, str]] = {}
        self.msg_types: dict[int, str] = {}

    @staticmethod
    def _count(acc: dict, verdict: str | None) -> None:
        acc["total"] += 1
        key = verdict if verdict in ("pass", "fail", "error", "skipped") else "error"
        acc[key] += 1

    def add_name(self, p: int, mt: int, protocol: str | None, scenario: str | None, msg_type: str | None) -> None:
        """The SQL engine's dictionary: hashes of (protocol, scenario) and message types -> names."""
        self.groups[p] = (protocol, scenario)
        self.msg_types[mt] = msg_type

    def add(self, r: dict) -> None:
        """One control row: CONTROL_COLUMNS + protocol, scenario, msg_type and order."""
        kind, run = r["kind"], r["run"]
        runs, with_verdicts = self.runs.setdefault((r["protocol"], r["scenario"]), (set(), set()))
        runs.add(run)
        if kind == DISCARD:
            k = (r["protocol"], r["implementation"], r["role"], r["clause"])
            self.discards[k] = self.discards.get(k, 0) + 1
        elif kind != VERDICT:
            self.events.append(Event(run, r["time_ns"] or 0, r["order"], kind, r["node"], r["fault"], r["detail"]))
            self.meta[run] = (r["protocol"], r["scenario"])
        if kind != VERDICT:
            return
        with_verdicts.add(run)
        v = r["verdict"]
        failed = v not in ("pass", "skipped")  # a check that did not apply (a capture's) failed nothing
        if failed:
            self.failures.append({k: r[k] for k in ("run", "seed", "scenario", "protocol", "implementation", "node",
                                                    "role", "msg_type", "clause", "verdict", "detail")})
            if len(self.failures) > 4 * MAX_FAILURES_LISTED:  # keep memory bounded: the first ones in order
                self.failures = sorted(self.failures, key=_failure_order)[:MAX_FAILURES_LISTED]
        zero = {"total": 0, "pass": 0, "fail": 0, "error": 0, "skipped": 0}
        if r["node"] == HARNESS_NODE:
            k = (r["protocol"], r["scenario"], r["msg_type"], r["clause"])
            acc = self.summary.setdefault(k, {**zero, "failing_seeds": set()})
            if failed and r["seed"] is not None:
                acc["failing_seeds"].add(r["seed"])
            self.matrix.append({"protocol": r["protocol"], "scenario": r["scenario"], "seed": r["seed"],
                                "run": run, "check": r["msg_type"], "verdict": v})
        else:
            k = (r["implementation"], r["protocol"], r["role"], r["clause"])
            acc = self.conf.setdefault(k, {**zero, "cases": set(), "failing_cases": set()})
            acc["cases"].add(r["msg_type"])
            if v != "pass":
                acc["failing_cases"].add(r["msg_type"])
        self._count(acc, v)

    def finish(self, out: Control) -> None:
        key = _key
        out.chaos_summary = [
            {"protocol": p, "scenario": s, "check": c, "clause": cl, **{k: v for k, v in a.items() if k != "failing_seeds"},
             "failing_seeds": sorted(a["failing_seeds"])[:MAX_FAILING_SEEDS]}
            for (p, s, c, cl), a in sorted(self.summary.items(), key=lambda kv: key(*kv[0]))]
        out.conformance = [
            {"implementation": i, "protocol": p, "role": ro, "clause": cl,
             **{k: v for k, v in a.items() if k not in ("cases", "failing_cases")},
             "cases": sorted(a["cases"], key=str), "failing_cases": sorted(a["failing_cases"], key=str)}
            for (i, p, ro, cl), a in sorted(self.conf.items(), key=lambda kv: key(*kv[0]))]
        # the seed matrix: the first MAX_SEEDS_LISTED runs of each scenario, and every failing run
        failing = {m["run"] for m in self.matrix if m["verdict"] not in ("pass", "skipped")}
        order: dict[tuple, list] = {}
        for m in self.matrix:
            order.setdefault((m["protocol"], m["scenario"]), []).append((m["seed"] is None, m["seed"], m["run"]))
        listed = set()
        for runs in order.values():
            firsts = sorted(set(runs))[:MAX_SEEDS_LISTED]
            listed.update(r for _, _, r in firsts)
        out.chaos_runs = [m for m in self.matrix if m["run"] in listed or m["run"] in failing]
        out.failures = sorted(self.failures, key=_failure_order)[:MAX_FAILURES_LISTED]
        out.discards = [{"protocol": p, "implementation": i, "role": ro, "clause": cl, "count": n}
                        for (p, i, ro, cl), n in sorted(self.discards.items(), key=lambda kv: key(*kv[0]))]
        out.runs = [{"protocol": p, "scenario": s, "runs": len(a), "runs_with_verdicts": len(b)}
                    for (p, s), (a, b) in sorted(self.runs.items(), key=lambda kv: key(*kv[0]))]
        out.events = self.events
        out.event_meta = self.meta
        out.groups = self.groups
        out.msg_types = self.msg_types
