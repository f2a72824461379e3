"""The driver-side pieces of the report, without Spark: percentiles from log-bucket histograms
stay within their stated error, and fault windows are cut as docs/reports.md says."""

from __future__ import annotations

import random

import pytest

from reports.histogram import ALPHA, Histogram, bucket_key, exact_quantile
from reports.model import fault_label
from reports.svg import fmt_ns, histogram
from reports.windows import END, Event, Segment, is_point_event, segments


def _hist(values: list[int]) -> Histogram:
    h = Histogram()
    for v in values:
        h.add(bucket_key(v), 1, v, v, float(v))
    return h


@pytest.mark.parametrize("seed", range(8))
def test_percentiles_are_within_the_stated_relative_error(seed: int) -> None:
    rng = random.Random(seed)
    values = [int(rng.lognormvariate(13, 1.5)) for _ in range(rng.randint(1, 3000))]
    values += [0] * rng.randint(0, 3) + [-rng.randint(1, 10**6) for _ in range(rng.randint(0, 3))]
    h = _hist(values)
    for q in (0.5, 0.9, 0.99, 0.999, 1.0):
        exact = exact_quantile(values, q)
        got = h.quantile(q)
        assert abs(got - exact) <= ALPHA * abs(exact), (q, got, exact)
    s = h.summary()
    assert (s["count"], s["max"], s["min"]) == (len(values), max(values), min(values))
    assert s["mean"] == round(sum(values) / len(values))


def test_merged_histograms_give_the_percentiles_of_the_union() -> None:
    rng = random.Random(7)
    a = [rng.randint(1, 10**7) for _ in range(500)]
    b = [rng.randint(10**6, 10**9) for _ in range(700)]
    h = _hist(a)
    h.merge(_hist(b))
    for q in (0.5, 0.9, 0.99):
        exact = exact_quantile(a + b, q)
        assert abs(h.quantile(q) - exact) <= ALPHA * exact


def test_a_bucket_holding_one_value_reports_it_exactly() -> None:
    assert _hist([123_456_789]).summary()["p50"] == 123_456_789
    assert Histogram().summary()["p50"] is None


def _ev(t: int, kind: str, node: str | None = None, fault: str | None = None, detail: str | None = None,
        run: str = "s/1", order: int = 0) -> Event:
    return Event(run, t, order or t, kind, node, fault, detail)


def test_crash_restart_and_pause_resume_make_windows_per_node() -> None:
    segs = segments([_ev(10, "crash", "broker"), _ev(20, "restart", "broker"),
                     _ev(30, "pause", "workers.0"), _ev(35, "resume", "workers.0")])
    assert segs == [Segment("s/1", 10, 20, "crash:broker"), Segment("s/1", 30, 35, "pause:workers.0")]


def test_overlapping_windows_are_cut_into_labelled_segments() -> None:
    segs = segments([
        _ev(100, "fault", "nemesis", "partition", "p1 [['a'], ['b']]"),
        _ev(150, "crash", "a"),
        _ev(200, "fault", "nemesis", "partition", "p2 one-way [['c'], ['d']]"),
        _ev(250, "fault", "nemesis", "heal", "p1"),
        _ev(300, "restart", "a"),
        _ev(400, "fault", "nemesis", "heal", "p2"),
    ])
    assert segs == [Segment("s/1", 100, 150, "partition"), Segment("s/1", 150, 300, "crash:a+partition"),
                    Segment("s/1", 300, 400, "partition")]


def test_heal_of_several_partitions_slow_links_and_clock_skew() -> None:
    segs = segments([
        _ev(1, "fault", "nemesis", "partition", "p1 [['a'], ['b']]"),
        _ev(2, "fault", "nemesis", "partition", "p2 [['c'], ['d']]"),
        _ev(3, "fault", "nemesis", "heal", "p1 p2"),
        _ev(4, "fault", "nemesis", "slow-link", "l1 a->b ('uniform', 1, 2)"),
        _ev(5, "fault", "nemesis", "restore-link", "l1"),
        _ev(6, "fault", "b", "clock", "offset=5000ns drift=0.0"),
        _ev(7, "fault", "b", "clock", "offset=0ns drift=0.0"),
        _ev(8, "fault", "c", "clock", "offset=0ns drift=0.001"),
    ])
    assert segs == [Segment("s/1", 1, 3, "partition"), Segment("s/1", 4, 5, "slow-link"),
                    Segment("s/1", 6, 7, "clock:b"), Segment("s/1", 8, END, "clock:c")]


def test_a_window_never_closed_lasts_to_the_end_and_zero_length_windows_vanish() -> None:
    segs = segments([_ev(5, "crash", "x"), _ev(5, "restart", "x", order=6), _ev(9, "pause", "y", run="s/2")])
    assert segs == [Segment("s/2", 9, END, "pause:y")]


def test_point_faults_open_no_window() -> None:
    e = _ev(3, "fault", "a", "incompatible-sockets", "dealer cannot talk to pub")
    assert is_point_event(e) and segments([e]) == []
    assert not is_point_event(_ev(3, "crash", "a"))


def test_labels_and_formatting() -> None:
    assert fault_label(0) == "none" and fault_label(3) == "delay+duplicate" and fault_label(8) == "other"
    assert (fmt_ns(850), fmt_ns(12_345), fmt_ns(4_560_000), fmt_ns(1.2e9), fmt_ns(None)) == \
        ("850 ns", "12.3 µs", "4.56 ms", "1.2 s", "–")
    svg = histogram([(bucket_key(v), 1) for v in (1_000, 50_000, 2_000_000)] + [(-1, 2)], "t")
    assert svg.startswith("<svg") and svg.count("<rect") == 4


def test_spark_errors_are_shown_by_the_python_exception_a_task_raised() -> None:
    from reports.cli import spark_error

    text = ("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
            "  File \"x.py\", line 1\nValueError: /t/a.parquet: bad\n\tat org.apache.spark.Foo\n")
    assert spark_error(text) == "ValueError: /t/a.parquet: bad"
    assert spark_error("[PATH_NOT_FOUND] Path does not exist: /x.\nmore") == "[PATH_NOT_FOUND] Path does not exist: /x."


def test_a_skipped_verdict_is_neither_a_failure_nor_a_pass() -> None:
    """A check that does not apply (a capture's `n/a`) is listed as skipped: not among the
    failures, not a failing seed, and not shown as passed."""
    from types import SimpleNamespace

    from reports.control import Control, ControlTables
    from reports.model import _chaos

    tables = ControlTables()
    for check, verdict in (("one-request-per-worker", "pass"), ("exactly-once", "skipped")):
        tables.add({"run": "pcap-a/pcap@x", "seed": 0, "implementation": "", "node": "harness", "role": "harness",
                    "kind": "verdict", "time_ns": 5, "fault": None, "verdict": verdict, "clause": check,
                    "detail": "", "protocol": "dcp", "scenario": "pcap-a", "msg_type": check, "order": 0})
    out = Control()
    tables.finish(out)
    assert out.failures == []
    chaos = _chaos(SimpleNamespace(control=out))
    status = {s["check"]: (s["status"], s["failing_seeds"]) for s in chaos["summary"]}
    assert status == {"one-request-per-worker": ("pass", []), "exactly-once": ("skipped", [])}
    assert chaos["runs"][0]["ok"]
