"""One Spark session and one report for the whole test run: a local session takes seconds to
start, and the report over all the traces below is built once and read by every test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.composition import run_sim
from harness.scenario import load_scenario
from harness.trace import RunInfo, TraceWriter

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
SIM_RUNS = (("scenarios/dcp/clean.yaml", (1, 2)), ("scenarios/dcp/lossy.yaml", (1,)),
            ("scenarios/dcp/worker-crash.yaml", (1,)), ("scenarios/dcp/partition-heal.yaml", (1,)))


@pytest.fixture(scope="session")
def spark():  # -> SparkSession
    from reports.session import get_session

    return get_session("local[2]")


def write_hand_trace(path: str) -> None:
    """A run the simulator does not produce (yet): fan-out to three subscribers, a duplicate, a
    delayed, a dropped and a lost message, an orphan receipt, a negative latency (clocks that
    disagree), rows without msg_id, a pause window, commands paired with deliveries by corr, a
    failed chaos verdict, a discard and a point fault."""
    with TraceWriter(path, RunInfo("hand/1", 1, "hand", "pppp")) as t:
        t.register_node("pub", "publisher")
        for i in range(3):
            t.register_node(f"subs.{i}", "subscriber", "mutant:slow" if i == 2 else "reference")
        t.register_node("harness", "harness", "")
        e = t.emit
        e("app", "command", 100, msg_type="request", corr="app-1")
        e("app", "command", 200, msg_type="request", corr="app-2")  # never answered
        e("pub", "send", 1_000, msg_type="PUBLISH", msg_id=1, size=40)
        for sub, at in (("subs.0", 1_500), ("subs.1", 2_500), ("subs.2", 10_000)):
            e(sub, "recv", at, msg_type="PUBLISH", msg_id=1, size=40, peer="pub")
        e("pub", "send", 2_000, msg_type="PUBLISH", msg_id=2)
        e("pub", "fault", 2_000, msg_type="PUBLISH", msg_id=2, fault="delay:rule-1", detail="+40000ns")
        e("pub", "send", 3_000, msg_type="HEARTBEAT", msg_id=3)
        e("pub", "drop", 3_001, msg_type="HEARTBEAT", msg_id=3, fault="drop:rule-0")
        e("pub", "send", 4_000, msg_type="HEARTBEAT", msg_id=4)  # lost without a trace
        e("subs.0", "recv", 5_000, msg_type="PUBLISH", msg_id=99)  # orphan: no send
        e("pub", "send", 6_000, msg_type="PUBLISH", msg_id=6)
        e("pub", "fault", 6_000, msg_type="PUBLISH", msg_id=6, fault="duplicate:rule-2", detail="1 extra")
        e("subs.0", "recv", 6_500, msg_type="PUBLISH", msg_id=6)
        e("subs.0", "recv", 6_600, msg_type="PUBLISH", msg_id=6)
        e("pub", "send", 6_700, msg_type="PUBLISH")  # no msg_id: cannot be paired
        e("subs.1", "pause", 7_000, fault="pause")
        e("pub", "send", 8_000, msg_type="PUBLISH", msg_id=7)
        e("subs.1", "resume", 9_000, fault="resume", detail="1 waiting")
        e("subs.1", "recv", 9_100, msg_type="PUBLISH", msg_id=7)
        e("pub", "fault", 9_500, fault="incompatible-sockets", detail="pub cannot talk to pub")
        e("subs.2", "recv", 19_000, msg_type="PUBLISH", msg_id=8)
        e("pub", "send", 20_000, msg_type="PUBLISH", msg_id=8)  # received "before" it was sent
        e("subs.2", "discard", 21_000, socket="sub", clause="pppp.publish.malformed", detail="bad frame")
        e("subs.2", "recv", 42_000, msg_type="PUBLISH", msg_id=2)  # rows need not be in time order
        e("app", "deliver", 30_100, msg_type="reply", corr="app-1")
        e("app", "deliver", 30_200, msg_type="reply", corr="app-3")  # no command
        e("harness", "verdict", 40_000, msg_type="in-order", clause="pppp.subscriber.in-order", verdict="fail",
          detail="subs.2 saw 8 before 7")
        e("harness", "verdict", 40_000, msg_type="no-node-errors", clause="no-node-errors", verdict="pass")


def write_live_trace(path: str) -> None:
    """What a live run writes (harness/live): a run id with its start time, wall-clock times,
    sends without a msg_id and receipts without a message type (real sockets carry no harness
    id; the runtime does not decode what it receives), commands and deliveries paired by corr,
    a delivery of a kind that never carries one (a conformance conductor's verdict) and its chaos
    verdicts."""
    with TraceWriter(path, RunInfo("hand/live-1@20260101T000000Z-abc123", 1, "hand", "pppp")) as t:
        t.register_node("pub", "publisher")
        t.register_node("harness", "harness", "")
        e = t.emit
        e("app", "command", 1_000, msg_type="request", corr="live-1")
        e("pub", "send", 2_000, msg_type="PUBLISH", size=40)
        e("subs.0", "recv", 2_300_000, size=40, peer="pub")
        e("app", "deliver", 5_001_000, msg_type="reply", corr="live-1")
        e("conductor", "deliver", 5_002_000, msg_type="case-result")  # the conductor's own: never correlated
        e("harness", "verdict", 9_000_000, msg_type="in-order", clause="pppp.subscriber.in-order", verdict="pass")


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness.conformance.runner import load_suite, run_case_sim, write_trace_verdicts
    from reference_nodes.dcp import mutants
    from reference_nodes.dcp.broker import Broker

    root = tmp_path_factory.mktemp("traces")
    for path, seeds in SIM_RUNS:
        for seed in seeds:
            assert run_sim(load_scenario(path), seed, str(root)).ok
    cases = load_suite("dcp", "broker", only=["ping-pong", "register-echo"])
    write_trace_verdicts(str(root / "conformance" / "reference.parquet"),
                         [run_case_sim(c, Broker) for c in cases], "reference")
    write_trace_verdicts(str(root / "conformance" / "no-pong.parquet"),
                         [run_case_sim(c, mutants.NoPongBroker) for c in cases], "mutant:no-pong")
    write_hand_trace(str(root / "hand" / "hand-1.parquet"))
    write_live_trace(str(root / "hand" / "live-seed-1.parquet"))
    return root


@pytest.fixture(scope="session")
def report(traces: Path, spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from reports.cli import build_report

    out = tmp_path_factory.mktemp("report")
    data = build_report(str(traces), str(out), spark=spark)
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(data, default=str))
    return data, out


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`) every report test runs in one worker, so the
    session's Spark and its report over the traces are made once, not once per worker."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.xdist_group("spark"))
