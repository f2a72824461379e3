"""The client suite judges a client that reads the log in its own lawful way, not only the
reference's: a client that asks RequestLogInfo (how far the log goes) before each RequestEntries
is answered, so its read is judged rather than left hanging; a client that reads the log before
its first update (to build its replica) has that read answered, so its update comes and is judged
(simulator, both dialects; the live proof with the independent stand-in is
tests/conformance/test_raft_standins.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.conformance.runner import load_suite, run_case_sim
from harness.node import Action, Send
from reference_nodes.raft.client import Client
from reference_nodes.raft.client_reader import SUB
from reference_nodes.raft.mutants import MUTANTS

READING = ("entries-follow-up", "entries-not-leader", "entries-snapshot-follow-up", "retry-same-reqid")


class LogInfoFirstClient(Client):
    """The reference client, but a read towards a new target starts with a RequestLogInfo and its
    RequestEntries goes out once that is answered (the document lets a client use RequestLogInfo
    whenever it likes); a read sent again (to the leader a refusal names) goes out at once.
    Unanswered, it waits: the cases must answer what a lawful reader asks. Its operation timeout
    is a minute (the document sets none; the stand-in has none), longer than any case's wait."""

    info_rpc: Any = None
    informed = 0  # the read target RequestLogInfo was answered for

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.op_timeout = 60_000_000_000

    def read_to(self, target: int, now: int) -> list[Action]:
        if max(self.read_target, target) <= self.informed:
            return super().read_to(target, now)
        self.read_target = max(self.read_target, target)
        if self.applied >= self.read_target or self.read is not None or self.info_rpc is not None:
            return []
        rid, self.info_rpc = self.new_id("RequestLogInfo")
        fields: dict[str, Any] = {self.d.rpc_id("RequestLogInfo"): rid}
        if not self.d.strict:
            fields["cluster"] = self.cluster
        return [Send("dealer", self.d.enc["RequestLogInfo"](fields), "RequestLogInfo")]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket != SUB and frames and self.info_rpc is not None \
                and self.d.id_key(frames[0], "RequestLogInfo") == self.info_rpc:
            self.info_rpc, self.informed = None, self.read_target
            return [self.start_read(now)]
        return super().receive(socket, frames, now)


class ReadsFirstClient(Client):
    """The reference client, but once it knows the leader it reads the log (RequestEntries from 0)
    before its first update goes out: the document orders none of a client's RPCs."""

    synced = False

    def send_update(self, now: int) -> list[Action]:
        return super().send_update(now) if self.synced else []

    def resend(self, now: int) -> list[Action]:
        if self.synced:
            return super().resend(now)
        self.read = None  # (again) to the leader now known
        return [self.start_read(now)] if self.leader is not None else []

    def on_entries_response(self, frames: list[bytes], now: int) -> list[Action]:
        out = super().on_entries_response(frames, now)
        if not self.synced and self.read is None and self.leader is not None:
            self.synced = True
            out += super().send_update(now)
        return out


def _case(case_id: str) -> Any:
    return next(c for c in load_suite("raft", "client") if c.id == case_id)


@pytest.mark.parametrize("dialect", ["strict", "raft:zmq-raft"])
def test_a_reader_that_asks_request_log_info_first_is_judged_by_the_reading_cases(dialect: str) -> None:
    """Before the cases answered RequestLogInfo, retry-same-reqid failed this client on
    raft.reqid.unique (a MUST it keeps: its read-back hung, so its second update never came) and
    the three entries cases were skipped (its RequestEntries never came)."""
    for case_id in READING:
        r = run_case_sim(_case(case_id), LogInfoFirstClient, dialect=dialect)
        want = "skipped" if case_id == "entries-snapshot-follow-up" and dialect != "strict" else "pass"
        assert r.verdict == want, (case_id, r.reason)


def test_the_snapshot_chunk_case_fails_a_client_that_does_not_follow_up_a_chunk() -> None:
    """entries-snapshot-follow-up (status 3): the follow-up keeps the reqid and takes the chunk's
    LOG INDEX; a client that starts a new RPC instead fails raft.entries.follow-up, one that takes
    the chunk for the end too (tests/conformance/test_raft_standins.py, ``--break no-follow-up``)."""
    case = _case("entries-snapshot-follow-up")
    r = run_case_sim(case, MUTANTS["new-reqid-follow-up"][1])
    assert (r.verdict, r.clause) == ("fail", "raft.entries.follow-up"), r.reason
    assert run_case_sim(case, LogInfoFirstClient).verdict == "pass"


UPDATING = ("entries-follow-up", "entries-not-leader", "entries-snapshot-follow-up", "find-leader", "redirect",
            "retry-same-reqid", "survives-malformed", "transit-state")


@pytest.mark.parametrize("dialect", ["strict", "raft:zmq-raft"])
def test_a_client_that_reads_the_log_before_its_first_update_passes(dialect: str) -> None:
    """Before the cases answered a read before the update, this client failed all eight cases that
    wait for its update on raft.client.follow-leader, though its read had gone to the leader."""
    for case_id in UPDATING:
        r = run_case_sim(_case(case_id), ReadsFirstClient, dialect=dialect)
        want = "skipped" if case_id == "entries-snapshot-follow-up" and dialect != "strict" else "pass"
        assert r.verdict == want, (case_id, r.reason)
