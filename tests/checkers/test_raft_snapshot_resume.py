"""The snapshot-resume check on hand-made wire traffic (leader a, its link ``peer:b`` to follower
b): what obliges the leader, what a leader may do without failing, and what ends an obligation.
(The check against the ignores-resume-offset mutant in a run: tests/checkers/test_raft_checkers.py;
over real sockets with the peers external: tests/live/test_raft_snapshot_resume_live.py.)"""

from __future__ import annotations

from harness.checkers.base import CRASH, RECV, SEND, Event
from harness.checkers.raft import SnapshotResume
from harness.protocols import codec

RAFT = codec("raft", "strict")
SIZE = 100


class Link:
    """Feeds one checker what leader a sends on ``peer:b`` and the answers it receives."""

    def __init__(self) -> None:
        self.checker = SnapshotResume()
        self.t = 0

    def event(self, kind: str, name: str, node: str = "a", **fields: object) -> None:
        self.t += 1_000_000
        frames = RAFT.encode(name, fields)
        self.checker.on_event(Event(self.t, node, "peer", kind, "peer:b", frames, codec=RAFT))

    def chunk(self, mid: int, offset: int, term: int = 1, index: int = 9, size: int = SIZE) -> None:
        self.event(SEND, "InstallSnapshot", message_id=mid, cluster=b"", peer_id="a", term=term,
                   last_included_index=index, last_included_term=1, snapshot_offset=offset, snapshot_size=size,
                   chunk=bytes(min(10, size - offset)))

    def answer(self, mid: int, offset: int | None, term: int = 1) -> None:
        fields: dict[str, object] = {"message_id": mid, "term": term}
        if offset is not None:
            fields["next_offset"] = offset
        self.event(RECV, "InstallSnapshotResponse", **fields)

    def heartbeat(self, mid: int) -> None:
        self.event(SEND, "AppendEntries", message_id=mid, cluster=b"", peer_id="a", term=1, prev_log_index=9,
                   prev_log_term=1, commit_index=9, entries=[])

    @classmethod
    def owing(cls, offset: int = 10) -> "Link":
        """A link whose first chunk (id 1, at 0) was answered naming ``offset``: the leader owes it."""
        link = cls()
        link.chunk(1, 0)
        link.answer(1, offset)
        return link

    def verdict(self):
        [v] = self.checker.finish(self.t)
        return v


def test_a_leader_that_goes_on_from_the_offset_named_passes_and_one_that_goes_on_from_its_own_count_fails() -> None:
    good = Link()
    good.chunk(1, 0)
    good.answer(1, 10)
    good.chunk(2, 10)
    good.answer(2, 0)  # the follower restarted: its partial snapshot is gone
    good.chunk(3, 0)
    v = good.verdict()
    assert v.ok and "2 answer(s)" in v.detail and "(1 of them not the end" in v.detail, v.detail
    assert "2 next chunk(s)" in v.detail, v.detail

    bad = Link()
    bad.chunk(1, 0)
    bad.answer(1, 10)
    bad.chunk(2, 10)
    bad.answer(2, 0)
    bad.chunk(3, 20)
    v = bad.verdict()
    assert not v.ok and v.clause == "raft.snapshot.resume-offset"
    assert "a sent the chunk at byte 20" in v.detail and "asked for byte 0" in v.detail, v.detail
    assert [e["kind"] for e in v.evidence] == ["recv", "send"]
    assert v.evidence[0]["answered_offset"] == 10


def test_a_repeat_of_the_answered_chunk_keeps_the_obligation_for_the_next_new_one() -> None:
    link = Link()
    link.chunk(1, 30)
    link.answer(1, 0)
    link.chunk(1, 30)  # the same request again (a retry that crossed the answer)
    link.chunk(2, 40)
    assert not link.verdict().ok


def test_an_answer_to_a_request_the_leader_has_since_followed_by_another_obliges_nothing() -> None:
    """A late answer (to an earlier request, or a duplicate of one) is stale: a leader with
    several chunks in flight, or one that already went on, owes it nothing."""
    link = Link()
    link.chunk(1, 0)
    link.chunk(2, 10)  # two in flight
    link.answer(1, 10)
    link.chunk(3, 20)
    link.answer(1, 10)  # a duplicate of an earlier answer
    link.chunk(4, 30)
    v = link.verdict()
    assert v.ok and "0 answer(s)" in v.detail, v.detail


def test_an_answer_without_an_offset_past_the_end_or_of_another_term_obliges_nothing() -> None:
    link = Link()
    link.chunk(1, 0)
    link.answer(1, None)  # no offset frame: the leader goes on as it likes
    link.chunk(2, 50)
    link.answer(2, SIZE)  # the end: the transfer is done
    link.chunk(3, 0, index=12)
    link.answer(3, 0, term=2)  # the leader must step down
    link.chunk(4, 60, term=1, index=12)
    link.answer(4, 0, term=0)  # an answer of an older term, which the leader may ignore
    link.chunk(5, 70, term=1, index=12)  # it goes on as it likes
    v = link.verdict()
    assert v.ok and "0 answer(s)" in v.detail, v.detail


def test_another_snapshot_term_or_request_ends_the_obligation() -> None:
    for moved_on in (lambda w: w.chunk(2, 0, index=12),  # a newer snapshot, from its start
                     lambda w: w.chunk(2, 0, term=2),  # a new term (a new leadership)
                     lambda w: w.heartbeat(2)):  # not a chunk at all
        link = Link.owing()
        moved_on(link)
        link.chunk(3, 50)
        v = link.verdict()
        assert v.ok and "1 answer(s)" in v.detail and "0 next chunk(s)" in v.detail, v.detail


def test_a_crash_of_the_leader_forgets_its_links() -> None:
    link = Link.owing()
    link.t += 1_000_000
    link.checker.on_event(Event(link.t, "a", "peer", CRASH, None, None))
    link.chunk(5, 30)  # the restarted leader, before it heard from b again: owes nothing
    link.answer(5, 40)
    link.chunk(6, 40)
    v = link.verdict()
    assert v.ok and "2 answer(s)" in v.detail and "1 next chunk(s)" in v.detail, v.detail


def test_another_leaders_link_and_another_node_are_kept_apart() -> None:
    link = Link.owing()
    link.event(SEND, "InstallSnapshot", node="c", message_id=7, cluster=b"", peer_id="c", term=1,
               last_included_index=9, last_included_term=1, snapshot_offset=50, snapshot_size=SIZE, chunk=bytes(10))
    link.chunk(2, 10)
    v = link.verdict()
    assert v.ok and "1 next chunk(s)" in v.detail, v.detail
