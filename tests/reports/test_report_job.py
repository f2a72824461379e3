"""The Spark report over traces the harness produced: its numbers agree with an independent
pyarrow computation, and the HTML renders in a real headless browser with the same numbers."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.compute as pc
import pytest

from harness.composition import run_sim
from harness.conformance.runner import load_suite, run_case_sim, write_trace_verdicts
from harness.scenario import load_scenario
from harness.trace import read_trace
from reference_nodes.dcp import mutants
from reference_nodes.dcp.broker import Broker

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
pytestmark = pytest.mark.timeout(600)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("traces")
    for path, seeds in (("scenarios/dcp/clean.yaml", (1, 2)), ("scenarios/dcp/lossy.yaml", (1,))):
        for seed in seeds:
            assert run_sim(load_scenario(path), seed, str(root)).ok
    cases = load_suite("dcp", "broker", only=["ping-pong", "register-echo"])
    write_trace_verdicts(str(root / "conformance-reference.parquet"), [run_case_sim(c, Broker) for c in cases],
                         "reference")
    write_trace_verdicts(str(root / "conformance-no-pong.parquet"),
                         [run_case_sim(c, mutants.NoPongBroker) for c in cases], "mutant:no-pong")
    return root


@pytest.fixture(scope="module")
def report(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from reports.cli import build_report
    from reports.session import get_session

    out = tmp_path_factory.mktemp("report")
    data = build_report(str(traces), str(out), spark=get_session("local[2]"))
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(data, default=str))
    return data, out


def test_runs_and_chaos_verdicts_per_scenario_and_seed(report: tuple[dict, Path]) -> None:
    data, _ = report
    runs = {(r["scenario"], r["runs"]) for r in data["runs"]}
    assert ("dcp-clean", 2) in runs and ("dcp-lossy", 1) in runs
    summary = {(s["scenario"], s["check"]): s for s in data["chaos"]["summary"]}
    assert summary[("dcp-clean", "exactly-once")]["total"] == 2 == summary[("dcp-clean", "exactly-once")]["pass"]
    assert summary[("dcp-lossy", "one-request-per-worker")]["status"] == "pass"


def test_conformance_per_implementation_and_clause(report: tuple[dict, Path]) -> None:
    data, _ = report
    rows = {(r["implementation"], r["clause"]): r for r in data["conformance"]}
    assert rows[("reference", "dcp.heartbeat.pong")]["status"] == "pass"
    broken = rows[("mutant:no-pong", "dcp.heartbeat.pong")]
    assert broken["fail"] >= 1 and broken["status"] == "fail" and "ping-pong" in broken["failing_cases"]


def _exact_latencies(traces: Path) -> dict[str, list[int]]:
    """send -> recv latency per message type, straight from the Parquet files with pyarrow."""
    out: dict[str, list[int]] = {}
    for f in sorted(traces.glob("*/*.parquet")):
        t = read_trace(str(f)).select(["run", "kind", "msg_type", "msg_id", "time_ns"])
        sends = t.filter(pc.equal(t["kind"], "send")).select(["run", "msg_id", "msg_type", "time_ns"])
        recvs = t.filter(pc.equal(t["kind"], "recv")).select(["run", "msg_id", "time_ns"])
        recvs = recvs.rename_columns(["run", "msg_id", "t_recv"])
        joined = recvs.join(sends, ["run", "msg_id"], join_type="inner")
        for mt, a, b in zip(joined["msg_type"].to_pylist(), joined["time_ns"].to_pylist(), joined["t_recv"].to_pylist()):
            out.setdefault(mt, []).append(b - a)
    return out


def test_latency_percentiles_agree_with_an_exact_computation(report: tuple[dict, Path], traces: Path) -> None:
    data, _ = report
    exact = _exact_latencies(traces)
    rel = data["latency_method"]["relative_error"]
    rows = {r["msg_type"]: r for r in data["latency"]["by_msg_type"] if r["protocol"] == "dcp"}
    assert {"REQUEST", "REPLY"} <= set(rows)
    for mt, values in exact.items():
        if mt not in rows or not mt.isupper():
            continue
        values.sort()
        row = rows[mt]
        assert row["count"] == len(values), mt
        assert row["max"] == values[-1] and row["min"] == values[0], mt
        for q in (50, 90, 99):
            want = values[max(math.ceil(q / 100 * len(values)) - 1, 0)]
            assert abs(row[f"p{q}"] - want) <= rel * want + 1, (mt, q, row[f"p{q}"], want)


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp()
    try:
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no chromium (scripts/setup-browser installs it)")
def test_html_renders_in_a_real_browser_with_the_numbers_of_the_json(report: tuple[dict, Path]) -> None:
    data, out = report
    url = (out / "report.html").resolve().as_uri()
    dom = _chromium("--dump-dom", "--virtual-time-budget=5000", url)
    assert dom.returncode == 0 and "<table" in dom.stdout, dom.stderr[-500:]
    parser = _Cells()
    parser.feed(dom.stdout)
    norm = [[re.sub(r"[,\u202f\u00a0 ]", "", c) for c in row] for row in parser.rows]
    for row in (r for r in data["latency"]["by_msg_type"] if r["protocol"] == "dcp"):
        hits = [cells for cells in norm if row["msg_type"] in cells and str(row["count"]) in cells]
        assert hits, f"no table row shows {row['msg_type']} with count {row['count']}"
    for s in data["chaos"]["summary"]:
        assert any(s["check"] in cells and s["scenario"] in cells and str(s["total"]) in cells for cells in norm), s
    png = out / "shot.png"
    shot = _chromium(f"--screenshot={png}", "--window-size=1200,1600", url)
    assert shot.returncode == 0 and png.exists() and png.stat().st_size > 20_000, shot.stderr[-500:]


def test_cli_report_command(traces: Path, tmp_path: Path) -> None:
    import sys

    r = subprocess.run([str(Path(sys.executable).parent / "zmq-harness"), "report", str(traces), "--out",
                        str(tmp_path / "r"), "--master", "local[1]"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "r" / "report.html").stat().st_size > 10_000
    assert json.loads((tmp_path / "r" / "report.json").read_text())["spark"]["master"] == "local[1]"
