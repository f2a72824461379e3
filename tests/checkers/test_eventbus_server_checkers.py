"""The two Event BUS checks that pair a server's answers with what it was asked or given
(harness/checkers/eventbus_server.py): each catches its mutants (tests/checkers/
test_eventbus_checkers.py, CAUGHT), and neither raises a false alarm for a server the
micro-toolkit dialect allows (its bus re-encodes the data it forwards, E-EVENTBUS-12)."""

from __future__ import annotations

from harness.composition import run_sim
from harness.scenario import parse_scenario
from reference_nodes.eventbus import mutants as M

# A small clean bus: two subtrees, a client of each, one of everything; periodic resyncs ask
# for a sequence above 0, so both filters and the SYNCEND echo are exercised.
CLEAN = """protocol: eventbus
name: server-checks
duration: 2s
nodes:
  bus: {role: server}
  weather: {role: client, config: {subtrees: [/weather/], resync: 300ms}}
  news: {role: client, config: {subtrees: [/news/], resync: 300ms}}
  all: {role: client, config: {resync: 300ms}}
workload:
  - {nodes: weather, op: publish, topics: [/weather/rain], rate: 10/s, from: 200ms, until: 1200ms}
  - {nodes: news, op: publish, topics: [/news/world], rate: 10/s, from: 200ms, until: 1200ms}
check: [convergence, snapshot-filter, forward-unchanged]
"""
MICRO = CLEAN.replace("protocol: eventbus\n", "protocol: eventbus\ndialect: eventbus:micro-toolkit\n")


def verdicts(text: str, **factories):
    result = run_sim(parse_scenario(text, "clean.yaml"), 1, factories=factories)
    return {v.check: v for v in result.verdicts}


def test_a_bus_that_reencodes_the_data_it_forwards_passes_in_the_micro_toolkit_dialect() -> None:
    assert "micro-toolkit" in MICRO
    server = M.MUTANTS["reencodes-data"][1]
    v = verdicts(MICRO, bus=server)
    assert v["forward-unchanged"].ok and v["snapshot-filter"].ok, v["forward-unchanged"].detail
    # ... while the same bytes are a change in strict mode, and an altered value is one in both
    assert not verdicts(CLEAN, bus=server)["forward-unchanged"].ok
    assert not verdicts(MICRO, bus=M.MUTANTS["alters-data"][1])["forward-unchanged"].ok


def test_the_micro_toolkit_subtree_echo_is_judged_on_the_parsed_list() -> None:
    v = verdicts(MICRO)
    assert v["snapshot-filter"].ok and v["convergence"].ok, v["snapshot-filter"].detail
    assert not verdicts(MICRO, bus=M.MUTANTS["no-sequence-filter"][1])["snapshot-filter"].ok
    assert not verdicts(MICRO, bus=M.MUTANTS["syncend-no-subtrees"][1])["snapshot-filter"].ok
