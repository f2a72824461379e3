"""Shipped Dafka chaos files with one group run as the independent stand-in
(tests/standins/dafka_independent.py: written from the document alone, habits of its own; the
entries of bench/chaos_standins.py, variant ``independent``): every check passes, and what the
checks judge of it they judge (the tap hears it: topic-frames counts its sends). A store of it
with a deliberate defect is still caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos_standins import ENTRIES, scenario_text
from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario

pytestmark = [pytest.mark.slow, pytest.mark.live]


def run(entry_id: str, tmp_path: Path, variant: str = "independent", extra: str = "") -> RunResult:
    text = scenario_text(ENTRIES[entry_id], variant)
    if extra:
        text = text.replace("--data-dir {data_dir}", "--data-dir {data_dir} " + extra)
    return run_live(parse_scenario(text, f"{entry_id}.yaml"), 1, str(tmp_path))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry_id", ["df-clean-store", "df-storerestart-store", "df-lossy-producer",
                                      "df-partition-cut", "df-twotowers-towers"])
def test_a_chaos_file_with_an_independent_group_passes(entry_id: str, tmp_path: Path) -> None:
    r = run(entry_id, tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    topics = next(v.detail for v in r.verdicts if v.check == "topic-frames")
    if "producer" in entry_id or "store" in entry_id:  # (a consumer may publish nothing the tap hears)
        assert "nothing heard on their XPUB" not in topics, topics  # the tap heard it


@pytest.mark.timeout(120)
def test_an_independent_store_that_acks_on_the_topic_name_is_caught(tmp_path: Path) -> None:
    r = run("df-clean-store", tmp_path, extra="--mutant ack-by-topic")
    failed = {v.check: v for v in r.failed}
    assert "topic-frames" in failed, [v.to_dict() for v in r.verdicts]
    assert failed["topic-frames"].clause == "dafka.wire.topic-ack", failed["topic-frames"].detail


@pytest.mark.timeout(120)
def test_a_cluster_of_independent_nodes_only_is_judged_through_the_tap(tmp_path: Path) -> None:
    """clean.yaml with the tower, producer, store and both consumers all independent processes:
    the tap is the harness's only node, and what it hears of them all conforms."""
    import yaml

    from bench.chaos_standins import DI_TOWER, READY, di_consumer, di_producer, di_store

    doc = yaml.safe_load((Path(__file__).parents[2] / "scenarios/dafka/chaos/clean.yaml").read_text())
    commands = {"tower": DI_TOWER, "producer": di_producer(60, 50), "store": di_store(),
                "early": di_consumer(), "late": di_consumer("latest")}
    for name, spec in doc["nodes"].items():
        spec.update(command=commands[name], ready=dict(READY))
    doc.pop("workload")
    r = run_live(parse_scenario(yaml.safe_dump(doc, sort_keys=False), "all-independent.yaml"), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    said = {v.check: v.detail for v in r.verdicts}
    # (a consumer publishes little, and what it sent before the tap connected is not heard: it
    # may be named "not judged"; the producer and the store publish all along)
    unheard = said["topic-frames"].partition("nothing heard on their XPUB) (external: ")[2]
    assert "producer" not in unheard and "store" not in unheard, said["topic-frames"]
    assert not said["topic-frames"].startswith("0 "), said["topic-frames"]
    assert "producer" in said["wire-conformance"] and "store" in said["wire-conformance"], said["wire-conformance"]
