"""The independent stand-ins (tests/standins/) as the external group of shipped chaos files, the
files' faults and checks kept (bench/chaos_standins.py builds each variant): per protocol at
least one file where the external process or its peer is crashed and restarted and one with a
partition or lossy links. Every verdict must pass: a failure against a correct implementation
is a false alarm (or a stand-in defect, judged by the document). Slow: each is a live run of
6-9 s; the whole sweep, with the reference node as the same external command as a baseline, is
`python -m bench.chaos_standins` (figures in docs/real-implementations.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos_standins import ENTRIES, run_one

KEPT = [
    "eb-restart-bus",  # the stand-in bus killed and started again: counter kept, history forgotten (E-EVENTBUS-09)
    "eb-crash-pubs",  # publishing stand-in clients killed, one restarted, publishing until the end
    "eb-partition-cut",  # publishing stand-in clients cut off from the bus for 2 s
    "pp-subrestart-subs",  # stand-in subscribers killed and restarted with their identity
    "pp-partition-subs",  # stand-in subscribers cut off longer than the disconnect time
    "pp-lossy-pub",  # the stand-in publisher behind lossy, reordering, duplicating links
    "df-storerestart-store",  # the stand-in store killed and restarted from its database
    "df-partition-cut",  # a stand-in consumer cut off from the producer and the store
    "df-lossy-producer",  # the stand-in producer's records and heads lost on the way
    "dc-brokerrestart-broker",  # the stand-in DCP broker killed and started again while requests flow
    "dc-lossy-workers",  # four stand-in DCP workers behind lossy, duplicating, delaying links
]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(180)
@pytest.mark.parametrize("entry", KEPT)
def test_a_standin_as_the_external_group_of_a_shipped_chaos_file_passes(entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # the commands name tests/standins/...
    r = run_one(ENTRIES[entry], "standin", 1)
    assert r["ok"], r["failed"]
    assert len(r["passed"]) >= 5, r  # the file's checks ran


# The reference node as the external process where it found a false alarm the stand-in did not:
# on partition-heal the reference subscriber takes the publisher for lost and opens a new
# connection, which the chaos proxy holds until the heal; its sends were read late and blamed on
# it (tests/checkers/test_pppp_observed.py). The stand-in keeps its connection.
REFERENCE_KEPT = ["pp-partition-subs"]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(180)
@pytest.mark.parametrize("entry", REFERENCE_KEPT)
def test_the_reference_node_as_the_external_group_of_a_shipped_chaos_file_passes(
        entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    r = run_one(ENTRIES[entry], "reference", 1)
    assert r["ok"], r["failed"]
    assert len(r["passed"]) >= 5, r
