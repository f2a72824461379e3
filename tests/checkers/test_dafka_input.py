"""store-input (harness/checkers/dafka_input.py): a store that takes a record from a message it
must discard (another version, ZRE's signature) is caught on the discard clause; the reference
store, handed the same damaged records, discards them and passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_live, run_sim
from harness.scenario import parse_scenario
from reference_nodes.dafka.mutants import MUTANTS

# headers.yaml with one of its drawn rules written out: half the RECORDs to the store get a near
# miss in a header byte; 3 s are enough for records, gaps and FETCHes
DAMAGED = Path("scenarios/dafka/explore/headers.yaml").read_text().replace("duration: 5s", "duration: 3s").replace(
    "until: 3s", "until: 1500ms").replace(
    "check:", "faults:\n  - rule: {message: RECORD, to: store, corrupt: header, probability: 50%}\ncheck:")


def store_input(seed: int, **factories) -> object:
    r: RunResult = run_sim(parse_scenario(DAMAGED, "damaged.yaml"), seed, factories=factories)
    return next(v for v in r.verdicts if v.check == "store-input")


@pytest.mark.parametrize("mutant,seed", [("accepts-any-version", 1), ("accepts-zre-signature", 2)])
def test_store_input_catches_a_store_that_takes_a_record_it_must_discard(mutant: str, seed: int) -> None:
    _, factory, clause = MUTANTS[mutant]
    v = store_input(seed, store=factory)
    assert not v.ok and v.clause == clause and "without having received it well formed" in v.detail, v.detail
    assert v.evidence and v.evidence[0]["node"] == "store"


def test_the_reference_store_discards_damaged_records_and_passes() -> None:
    v = store_input(2)  # the seed whose damage gives the ZRE signature
    assert v.ok and not v.detail.startswith("0 "), v.detail


@pytest.mark.slow
def test_over_real_sockets_the_chaos_proxy_damages_headers_and_the_check_holds(tmp_path: Path) -> None:
    """The proxy draws `corrupt: header` as the simulator does; the reference store passes and
    the one that takes any version fails store-input, live."""
    text = DAMAGED.replace("name: dafka-explore-headers", "name: headers-live")
    scenario = parse_scenario(text, "live.yaml")
    ref = run_live(scenario, 1, str(tmp_path / "ref"))
    assert next(v for v in ref.verdicts if v.check == "store-input").ok
    bad = run_live(scenario, 1, str(tmp_path / "bad"), factories={"store": MUTANTS["accepts-any-version"][1]})
    v = next(v for v in bad.verdicts if v.check == "store-input")
    assert not v.ok and v.clause == "dafka.wire.version-discard"
