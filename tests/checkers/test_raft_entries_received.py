"""``raft.entries.committed-only`` of peers whose sends nothing reports: an external peer's
answers to the harness's clients (the chaos proxy observes the peers' links to each other, not
to the clients), judged as the client received them. Before, commit-rule judged only a peer's
own sends, so ``entries-uncommitted`` as the external peers passed live though simulation
caught it. Simulation: the peers' RequestEntries answers are withheld from the checker."""

from __future__ import annotations

import pytest

from harness.checkers.base import Checker, Event, Verdict
from harness.checkers.raft import CommitRule
from harness.composition import run_sim
from reference_nodes.raft.mutants import MUTANTS
from tests.checkers.test_raft_checkers import scenario


class AnswersUnseen(Checker):
    """Feeds ``inner`` every event but the peers' RequestEntries answers (what a live run shows
    of external peers whose links to the clients nothing observes)."""

    name = "answers-unseen"

    def __init__(self, inner: Checker) -> None:
        super().__init__()
        self.inner = inner

    def on_event(self, ev: Event) -> None:
        if not (ev.role == "peer" and ev.kind == "send" and ev.msg_type == "RequestEntriesResponse"):
            self.inner.on_event(ev)

    def on_sockets(self, node: str, sockets: object) -> None:
        self.inner.on_sockets(node, sockets)  # type: ignore[arg-type]

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.inner.finish(end_ns)


def judged(mutant: str | None, seed: int, hide: bool = True) -> Verdict:
    sc = scenario("reads")
    factories = {} if mutant is None else {n: MUTANTS[mutant][1] for n in sc.node_names if sc.role_of(n) == "peer"}
    check = CommitRule(peers=3)
    watcher = AnswersUnseen(check) if hide else check
    run_sim(sc, seed, factories=factories, observers=[watcher])
    [v] = watcher.finish(sc.duration_ns)
    return v


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_uncommitted_entries_a_client_received_fail_though_no_send_was_seen(seed: int) -> None:
    assert judged(None, seed).ok
    v = judged("entries-uncommitted", seed)
    assert not v.ok and v.clause == "raft.entries.committed-only", v.detail
    assert "a peer whose sends nothing reports answered clients." in v.detail and "(as clients." in v.detail


def test_an_answer_seen_sent_is_judged_once_at_its_sender() -> None:
    v = judged("entries-uncommitted", 1, hide=False)
    assert not v.ok and "whose sends nothing reports" not in v.detail, v.detail
