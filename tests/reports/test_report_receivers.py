"""End-to-end latency per receiver (report.json ``latency.end_to_end_by_receiver``) on a small
PPPP run whose figures are known in advance: every link takes exactly 2 ms and a simulated node
takes no time, so each subscriber's application gets each message exactly 2 ms after the publish
command, and the publisher's own "published" delivery comes at once. The counts are what the
publisher numbered per channel; a subscriber of one channel has no row for the other."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.composition import run_sim
from harness.scenario import parse_scenario
from harness.trace import read_trace

SCENARIO = """protocol: pppp
name: pppp-receivers
duration: 1500ms
settle: 500ms
network:
  latency:
    default: "fixed(2ms)"
nodes:
  publisher: {role: publisher, config: {idle: 500ms, first_idle: 100ms, liveness: 3}}
  news: {role: subscriber, config: {channels: [news]}}
  every: {role: subscriber, config: {channels: [""]}}
workload:
  - {nodes: publisher, op: publish, rate: 20/s, from: 300ms, until: 1s, channel: [news, weather], size: 16}
"""
MS = 1_000_000


def test_each_subscriber_and_channel_gets_its_own_latency_row(spark, tmp_path: Path) -> None:
    from reports.cli import build_report

    r = run_sim(parse_scenario(SCENARIO, "receivers.yaml"), 1, str(tmp_path / "runs"))
    assert r.ok, [v.to_dict() for v in r.failed]
    rows = read_trace(r.trace_path).select(["node", "kind", "msg_type", "topic"]).to_pylist()
    published = Counter(x["topic"] for x in rows if x["kind"] == "deliver" and x["msg_type"] == "published")
    assert published["news"] >= 5 and published["weather"] >= 5, published

    report = build_report(str(tmp_path / "runs"), str(tmp_path / "report"), spark=spark)
    got = {(x["node"], x["delivery"], x["topic"]): (x["count"], x["p50"], x["p90"], x["p99"], x["max"])
           for x in report["latency"]["end_to_end_by_receiver"]}
    assert {(x["protocol"], x["scenario"], x["command"], x["clock"])
            for x in report["latency"]["end_to_end_by_receiver"]} == {("pppp", "pppp-receivers", "publish", "virtual")}

    def row(n: int, latency: int) -> tuple[int, int, int, int, int]:
        return (n, latency, latency, latency, latency)

    assert got == {
        ("publisher", "published", "news"): row(published["news"], 0),
        ("publisher", "published", "weather"): row(published["weather"], 0),
        ("news", "message", "news"): row(published["news"], 2 * MS),
        ("every", "message", "news"): row(published["news"], 2 * MS),
        ("every", "message", "weather"): row(published["weather"], 2 * MS),
    }
    html = (tmp_path / "report" / "report.html").read_text()
    assert "End-to-end latency per receiver" in html
