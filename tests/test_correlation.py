"""Workload commands carry a correlation id and the deliveries that answer them name it (issue
11, item 10): the trace pairs them, so the report's end-to-end latency and requests table are
filled, in simulation and live. Before, command rows had no corr: end-to-end latency was empty
and every command and delivery row was "unpaired"."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.composition import run_live, run_sim
from harness.scenario import parse_scenario
from harness.trace import read_trace


def short(path: str) -> str:
    return Path(path).read_text().replace("duration: 6s", "duration: 2500ms").replace("until: 5s", "until: 2s") \
        .replace("until: 4s", "until: 2s")


def pairing(trace: str) -> tuple[Counter, set[str], set[str]]:
    rows = read_trace(trace).select(["kind", "msg_type", "corr"]).to_pylist()
    no_corr = Counter(r["msg_type"] for r in rows if r["kind"] in ("command", "deliver") and r["corr"] is None)
    commands = {r["corr"] for r in rows if r["kind"] == "command" and r["corr"] is not None}
    delivered = {r["corr"] for r in rows if r["kind"] == "deliver" and r["corr"] is not None}
    return no_corr, commands, delivered


@pytest.mark.parametrize("path,answered_by", [("scenarios/dcp/clean.yaml", "reply"),
                                              ("scenarios/dafka/chaos/clean.yaml", "record"),
                                              ("scenarios/pppp/chaos/publisher-restart.yaml", "message")])
def test_commands_and_their_deliveries_share_a_correlation_id_in_simulation(tmp_path: Path, path: str,
                                                                             answered_by: str) -> None:
    r = run_sim(parse_scenario(short(path), path), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    no_corr, commands, delivered = pairing(r.trace_path)
    assert not no_corr, f"command/deliver rows without corr: {no_corr}"
    assert len(commands) > 10 and commands == delivered, (len(commands), len(delivered), commands ^ delivered)


def test_raft_operations_are_paired_by_their_id(tmp_path: Path) -> None:
    """A Raft client's "op" delivery names the operation's id (its wire request id is reqid),
    so it pairs with the command; before, it named the wire request id, which no command
    carries: every op delivery was an orphan."""
    path = "scenarios/raft/chaos/clock-pauses.yaml"
    r = run_sim(parse_scenario(Path(path).read_text(), path), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    no_corr, commands, delivered = pairing(r.trace_path)
    assert not no_corr, f"command/deliver rows without corr: {no_corr}"
    # an operation still queued when the run ends has no delivery yet; every delivery has its command
    assert len(delivered) > 10 and delivered <= commands and len(delivered) >= 0.9 * len(commands), \
        (len(commands), len(delivered), delivered - commands)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_live_commands_are_paired_too(tmp_path: Path) -> None:
    r = run_live(parse_scenario(short("scenarios/dcp/clean.yaml"), "clean.yaml"), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    no_corr, commands, delivered = pairing(r.trace_path)
    assert not no_corr and len(commands) > 10 and commands == delivered


class _Lifecycle:
    """An observer that keeps one node's lifecycle events and sends, in the order checkers see them."""

    name = "lifecycle-order"
    clause = ""
    kinds = None
    roles = None
    level = "MUST"
    from_capture = False

    def __init__(self, node: str) -> None:
        self.node = node
        self.seen: list[tuple[int, str, str]] = []

    def on_sockets(self, node: str, sockets: list) -> None:
        pass

    def on_event(self, ev) -> None:  # type: ignore[no-untyped-def]
        if ev.node == self.node and ev.kind in ("crash", "restart", "start", "send"):
            self.seen.append((ev.time_ns, ev.kind, ev.msg_type))

    def finish(self, end_ns: int) -> list:
        return []


def test_checkers_hear_of_a_restart_before_the_new_life_runs() -> None:
    """A checker that starts a node's state afresh at RESTART must not wipe the new life's first
    sends: CRASH, then RESTART, then the new life's START and sends (it was START, sends, RESTART)."""
    text = Path("scenarios/eventbus/explore/basic.yaml").read_text().replace(
        "check:", "faults:\n  - {at: 1s, crash: clients.0, restart_after: 300ms}\ncheck:")
    seen = _Lifecycle("clients.0")
    run_sim(parse_scenario(text, "basic.yaml"), 1, observers=[seen])  # type: ignore[list-item]
    at_restart = [kind for t, kind, _ in seen.seen if t == 1_300_000_000]
    assert at_restart[:3] == ["restart", "start", "send"], at_restart
    assert [k for t, k, _ in seen.seen if t == 1_000_000_000 and k != "send"] == ["crash"]
