"""Deliberately broken Raft peers (and one client): each breaks one rule and is otherwise the
reference node.

The checkers are tested against these (tests/checkers/test_raft_checkers.py): a checker that
passes its mutant has a hole. Each class overrides the least it can; its docstring names the
clause it breaks and how the break shows.

``MUTANTS`` maps a mutant's name to ``(role, factory, clause id)``.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, DurableStore, NodeContext, Send
from harness.protocols import DecodeError
from harness.protocols.raft import NULL
from reference_nodes.raft.client import Client
from reference_nodes.raft.log import RaftLog, entry_term
from reference_nodes.raft.mutants_broadcast import BROADCAST_ALSO_BREAKS, BROADCAST_MUTANTS
from reference_nodes.raft.peer import Link, Outstanding, Peer


class VoteTwicePeer(Peer):
    """Breaks ``raft.algorithm.vote-once``: grants every candidate whose log is up to date, even
    when it already voted for another in the term. Two candidates of one term can both win."""

    def grant_vote(self, candidate: str, last_index: int, last_term: int) -> bool:
        return self.log_up_to_date(last_index, last_term)


class SkipUpToDatePeer(Peer):
    """Breaks ``raft.algorithm.vote-up-to-date``: votes without comparing logs, so a candidate
    that missed committed entries can win (and Leader Completeness fails)."""

    def log_up_to_date(self, last_index: int, last_term: int) -> bool:
        return True


class ForgetVotePeer(Peer):
    """Breaks ``raft.algorithm.persist-before-reply`` for the vote: keeps it in memory only, so a
    restarted peer may vote again in a term it already voted in."""

    def load_state(self) -> None:
        super().load_state()
        self.voted_for = None

    def persist_term(self) -> None:
        self.store.put("term", self.term)


class VolatileLogPeer(Peer):
    """Breaks ``raft.algorithm.persist-before-reply`` for the log: acknowledges entries it keeps
    in memory only; after a crash they are gone, and committed entries can be lost."""

    def make_log(self) -> RaftLog:
        return RaftLog(DurableStore())


class CommitNoMajorityPeer(Peer):
    """Breaks ``raft.algorithm.commit-majority``: as leader, commits every entry of its term as
    soon as it has appended it, without waiting for a majority."""

    def advance_commit(self, now: int) -> list[Action]:
        n = self.log.last_index
        if n > self.commit_index and self.log.term_at(n) == self.term:
            return self.set_commit(n, now)
        return []

    def on_update(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        return super().on_update(ident, msg, now) + self.advance_commit(now)


class NoCheckpointPeer(Peer):
    """Breaks ``raft.algorithm.availability`` (E-RAFT-28): as a new leader it appends no entry of
    its own term, and otherwise commits as the reference does (only by an entry of its term). A
    leader elected over entries it does not know to be committed then commits nothing while the
    clients only retry the updates those entries hold (E-RAFT-16: a retry appends nothing): the
    cluster is up and answers no update."""

    def election_entries(self) -> list[bytes]:
        return []


class CommitOldTermPeer(NoCheckpointPeer):
    """Breaks ``raft.algorithm.commit-current-term`` (Raft 5.4.2, the paper's Figure 8): counts
    replicas of entries of earlier terms to commit them. (To let that happen it also appends no
    checkpoint entry when elected, as ``no-checkpoint`` does.)"""

    def advance_commit(self, now: int) -> list[Action]:
        matches = sorted([self.log.last_index] + [link.match_index for link in self.links.values()], reverse=True)
        n = matches[self.majority - 1]
        if n > self.commit_index:
            return self.set_commit(n, now)
        return []


class KeepConflictsPeer(Peer):
    """Breaks ``raft.algorithm.truncate-conflicts``: keeps an existing entry where the leader
    sends a different one (only appends beyond its log), so it applies entries the cluster
    replaced and its state machine diverges (State Machine Safety fails)."""

    def append_from_leader(self, prev: int, raws: list[bytes]) -> None:
        log = self.log
        for k in range(len(raws)):
            if prev + 1 + k > log.last_index:
                self.append_entries_local(raws[k:])
                return


class TruncateOnAppendPeer(Peer):
    """Breaks ``raft.algorithm.keep-matching-entries``: cuts its log after the previous entry of
    every AppendEntries it accepts and writes the entries there, also when it held them all (as
    node-zmq-raft's FileLog does), so a late AppendEntries drops entries it acknowledged."""

    def append_from_leader(self, prev: int, raws: list[bytes]) -> None:
        start = max(prev + 1, self.log.snapshot_index + 1)
        if start <= self.log.last_index:
            self.truncate_log(start)
        self.append_entries_local(raws[start - prev - 1:])


class WrongPrevTermPeer(Peer):
    """Breaks ``raft.safety.log-matching``: an off-by-one in its AppendEntries, whose
    prev_log_term is the term of the first entry sent rather than the term at prev_log_index
    (heartbeats and the start of the log are right). Followers accept entries after a
    mismatched predecessor, and its own AppendEntries contradict each other about which term
    precedes an entry."""

    def replicate(self, link: Link, now: int) -> list[Action]:
        log = self.log
        if link.next_index <= log.snapshot_index:
            return super().replicate(link, now)
        prev = link.next_index - 1
        last = min(log.last_index, prev + self.max_entries)
        raws = log.slice(prev + 1, last) if last > prev else []
        wrong = entry_term(raws[0]) if raws and prev > 0 else log.term_at(prev)
        fields = {"cluster": self.cluster, "peer_id": self.id, "term": self.term, "prev_log_index": prev,
                  "prev_log_term": wrong, "commit_index": self.commit_index, "entries": ()}
        return [self.request(link, "AppendEntries", fields, now, raws, prev=prev, count=len(raws))]


class IgnoreHigherTermPeer(Peer):
    """Breaks ``raft.algorithm.higher-term``: as leader, a higher term in a request or response
    does not make it a follower of that term; it answers the new leader's AppendEntries and a
    candidate's RequestVote with its old term."""

    def observe_term(self, term: int, now: int) -> list[Action]:
        if self.state == "leader":
            return []
        return super().observe_term(term, now)


class ReapplyReqidPeer(Peer):
    """Breaks ``raft.update.idempotent``: does not look a RequestUpdate's reqid up in its log, so
    a retried update is appended (and applied) a second time."""

    def find_update(self, reqid: bytes) -> int | None:
        return None


class NoDebouncePeer(Peer):
    """Breaks ``raft.rpc.response-id``: takes any response on a connection for the answer to its
    outstanding request, whatever its message id. A late answer to an earlier AppendEntries then
    counts as an acknowledgement of later entries, and the leader commits what no majority holds."""

    def answers(self, out: Outstanding, msg_id: int) -> bool:
        return True


class TruncatingLeaderPeer(Peer):
    """Breaks ``raft.safety.leader-append-only``: as leader, when a follower reports a conflict
    (a shorter log), it deletes its own entries from the follower's conflict index on, as a
    follower would."""

    def on_append_response(self, link: Link, out: Outstanding, msg: Any, now: int) -> list[Action]:
        hint = msg.get("conflict_index")
        if not msg["success"] and hint is not None and self.log.snapshot_index < hint <= self.log.last_index:
            self.truncate_log(hint)
        return super().on_append_response(link, out, msg, now)

    def replicate(self, link: Link, now: int) -> list[Action]:
        last = self.log.last_index  # acknowledgements of entries it has since deleted point past its log
        link.next_index = min(link.next_index, last + 1)
        link.match_index = min(link.match_index, last)
        return super().replicate(link, now)


class ApplyUncommittedPeer(Peer):
    """Breaks ``raft.safety.state-machine-safety``: applies entries as soon as its log holds them,
    committed or not; entries the cluster later replaces end up in its state machine."""

    def apply_limit(self) -> int:
        return self.log.last_index

    def on_update(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        return super().on_update(ident, msg, now) + self.apply_committed(now)

    def on_append_request(self, msg: Any, raws: list[bytes], now: int) -> tuple[list[Action], dict[str, Any]]:
        out, fields = super().on_append_request(msg, raws, now)
        return out + self.apply_committed(now), fields


class SnapshotAheadPeer(Peer):
    """Breaks ``raft.safety.state-machine-safety`` (the bug seed 301 of five-peers-everything
    found): with ``snapshot_keep`` its snapshot is numbered ``applied - snapshot_keep`` but holds
    the state at ``applied``, so whoever restores it and replays the kept entries applies them
    twice."""

    def state_at(self, index: int) -> Any:
        return self.sm.snapshot()


class FixedTimeoutPeer(Peer):
    """Breaks ``raft.algorithm.random-election-timeout``: every election timeout is exactly
    ``election_min_ms``. Peers that start together time out together, split the vote, and do
    it again, forever."""

    def reset_election_timer(self, now: int) -> None:
        self.election_deadline = now + self.election_min


class SlowElectionPeer(Peer):
    """Breaks ``raft.algorithm.random-election-timeout``: draws its election timeout from ten to
    twelve times the configured range, so a cluster without a leader stays without one for
    many times ELECTION_TIMEOUT_MAX. (Suite only: the chaos checks see it as slow liveness.)"""

    def reset_election_timer(self, now: int) -> None:
        self.election_deadline = now + 10 * self.rng.randint(self.election_min, self.election_max + self.election_max // 5)


class AcceptAnyPrevPeer(Peer):
    """Breaks ``raft.safety.log-matching`` as a follower: skips the consistency check of
    AppendEntries (prev_log_index / prev_log_term) and appends after whatever it holds."""

    def on_append_request(self, msg: Any, raws: list[bytes], now: int) -> tuple[list[Action], dict[str, Any]]:
        if msg["term"] < self.term:
            return [], {"term": self.term, "success": False}
        out = self.accept_leader(msg, now)
        prev = min(msg["prev_log_index"], self.log.last_index)
        self.append_from_leader(prev, raws)
        return out, {"term": self.term, "success": True}


class DiesOnMalformedPeer(Peer):
    """Breaks ``raft.wire.grammar`` (E-RAFT-23: drop what does not decode): raises on the first
    malformed message, so the process dies."""

    def malformed(self, socket: str, frames: list[bytes], err: Any) -> list[Action]:
        raise ValueError(f"malformed input: {err}")


class HidesLeaderPeer(Peer):
    """Breaks ``raft.wire.grammar`` (the answers' LEADER ID frame): as a follower it never says
    which peer leads (RequestConfig, RequestLogInfo and a refused RequestUpdate give nil), so a
    client can never find the leader through it."""

    def accept_leader(self, msg: Any, now: int) -> list[Action]:
        out = super().accept_leader(msg, now)
        self.leader_id = None
        return out


class NoRetryPeer(Peer):
    """Breaks ``raft.rpc.retry-after-timeout``: never repeats an unanswered request; a lost
    RequestVote or AppendEntries waits for the next election or entry."""

    def retry(self, link: Link, now: int) -> list[Action]:
        link.deadline = now + self.rpc_timeout
        return []


class SameMessageIdPeer(Peer):
    """Breaks ``raft.wire.message-id``: every request it sends carries message id 1 instead of
    the next id, so a receiver that debounces takes a new request for a repeat."""

    def request(self, link: Link, *args: Any, **kwargs: Any) -> Any:
        link.last_id = 0
        return super().request(link, *args, **kwargs)


class NeverExpiresPeer(Peer):
    """Breaks ``raft.update.reqid-freshness``: takes an update whatever the age of its reqid, so
    a request that reaches the cluster after REQUEST_UPDATE_TTL is still applied."""

    def expired(self, reqid: bytes, now: int) -> bool:
        return False


class ExpiredAsNotLeaderPeer(Peer):
    """Breaks ``raft.update.expired``: refuses an expired update with a third frame (nil, "not the
    leader, leader unknown"), so the client searches for a leader instead of giving the request up."""

    def update_reply(self, ident: bytes, reqid: bytes, ok: bool, third: Any = None) -> Any:
        if not ok and third is None:
            third = NULL
        return super().update_reply(ident, reqid, ok, third)


class NoHeartbeatPeer(Peer):
    """Breaks ``raft.algorithm.leader-heartbeat``: as leader it sends AppendEntries only when it
    has entries to replicate, so an idle follower's election timeout elapses."""

    def replicate(self, link: Link, now: int) -> list[Action]:
        if link.next_index > self.log.last_index:
            link.deadline = now + self.heartbeat
            return []
        return super().replicate(link, now)


class EntriesUncommittedPeer(Peer):
    """Breaks ``raft.entries.committed-only``: answers RequestEntries with every entry of its
    log, committed or not; a reader sees entries the cluster may later replace."""

    def pump_entries(self, *args: Any) -> list[Action]:
        saved, self.commit_index = self.commit_index, self.log.last_index
        try:
            return super().pump_entries(*args)
        finally:
            self.commit_index = saved


class IndexlessUpdatePeer(Peer):
    """Breaks ``raft.update.index-when-committed``: answers a committed RequestUpdate with status
    true and no LOG INDEX frame, as if it were still only accepted; the client never learns the
    update is committed."""

    def update_reply(self, ident: bytes, reqid: bytes, ok: bool, third: Any = None) -> Send:
        return super().update_reply(ident, reqid, ok, None if ok else third)


class SlowAppendRetryPeer(Peer):
    """Breaks ``raft.rpc.timeout-bound``: as leader, repeats an unanswered AppendEntries only
    after a whole ELECTION_TIMEOUT_MIN instead of at most half of it, so a follower that lost
    one request may time out and start an election against a live leader."""

    def request(self, link: Link, kind: str, *args: Any, **kwargs: Any) -> Send:
        sent = super().request(link, kind, *args, **kwargs)
        if kind == "AppendEntries":
            link.deadline = link.last_sent + self.election_min
        return sent

    def retry(self, link: Link, now: int) -> list[Action]:
        out = super().retry(link, now)
        if link.out is not None and link.out.kind == "AppendEntries":
            link.deadline = now + self.election_min
        return out


class ReqidNotInEntryPeer(Peer):
    """Breaks ``raft.update.reqid-in-entry``: writes an update's log entry with an all-zero
    request id and keeps the reqid in memory only (so it still answers a retry with the same
    index); a reader of the log, or a peer that becomes leader, cannot tell which request an
    entry came from, and the update is no longer idempotent across leaders."""

    def append_entries_local(self, raws: list[bytes]) -> int:
        if len(raws) != 1 or raws[0][12] != 0:  # not a client's update (the election checkpoint)
            return super().append_entries_local(raws)
        last = super().append_entries_local([bytes(12) + raws[0][12:]])
        self.reqids[raws[0][:12]] = last
        return last


class AnyClusterPeer(Peer):
    """Breaks ``raft.peer.cluster-ident``: serves RequestVote, AppendEntries and InstallSnapshot
    whatever cluster ident they carry, so a peer of another cluster sharing its endpoints can
    move its term, win its vote or write its log."""

    def on_peer_rpc(self, ident: bytes, body: list[bytes], msg: Any, now: int) -> list[Action]:
        saved, self.cluster = self.cluster, msg["cluster"]
        try:
            return super().on_peer_rpc(ident, body, msg, now)
        finally:
            self.cluster = saved


class IgnoresStopPeer(Peer):
    """Breaks ``raft.entries.stop-honoured``: takes a RequestEntries follow-up with count 0 for
    one without a count, so it goes on sending entries the client asked it to stop."""

    def on_entries(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        idf = self.d.rpc_id("RequestEntries")
        key = (ident, msg[idf])
        rpc = self.entries_rpcs.get(key)
        if msg.get("count") != 0 or rpc is None:
            return super().on_entries(ident, msg, now)
        rpc.unconfirmed = max(0, rpc.unconfirmed - 1)  # a follow-up: confirms one response, and goes on
        rpc.touched = now
        return self.pump_entries(ident, key, rpc, idf, msg[idf])


class UnboundedPipelinePeer(Peer):
    """Breaks ``raft.entries.pipeline``: answers a RequestEntries with every committed entry at
    once, answer after answer, never waiting for a follow-up (more than REQUEST_ENTRIES_PIPELINES
    unconfirmed)."""

    def init_request_handling(self) -> None:
        super().init_request_handling()
        self.pipeline = 1 << 30


class SkipsSnapshotPeer(Peer):
    """Breaks ``raft.wire.grammar`` (RequestEntries response, frame 5: "the first log entry
    following previous LOG INDEX"; E-RAFT-29): answers a RequestEntries whose previous LOG INDEX
    lies in its snapshot with the entries after the snapshot, without the snapshot's chunks, so a
    reader misses what the snapshot holds."""

    def pump_entries(self, ident: bytes, key: Any, rpc: Any, idf: str, rid: Any) -> list[Action]:
        if rpc.snap is None and rpc.next <= self.log.snapshot_index:
            rpc.next = self.log.snapshot_index + 1
        return super().pump_entries(ident, key, rpc, idf, rid)


class IgnoresResumeOffsetPeer(Peer):
    """Breaks ``raft.snapshot.resume-offset``: as leader, sends the next snapshot chunk from the
    end of the one answered, whatever byte offset the follower's answer names, so a follower
    that restarted in the middle of a transfer (its partial snapshot lost) is sent chunks it
    must throw away until the leader reaches the end and starts over."""

    def on_snapshot_response(self, link: Link, out: Outstanding, msg: Any, now: int) -> list[Action]:
        return super().on_snapshot_response(link, out, {"term": msg.get("term")}, now)


class NewReqidFollowUpClient(Client):
    """Breaks ``raft.entries.follow-up``: answers a RequestEntries response with status 2 (more to
    come) with a request of a new request id instead of a follow-up that keeps the RPC's id, so
    the peer sees a new RPC and the old one's pipeline is never confirmed."""

    following = False

    def on_entries_response(self, frames: list[bytes], now: int) -> list[Action]:
        self.following = True
        try:
            return super().on_entries_response(frames, now)
        finally:
            self.following = False

    def entries_request(self, rid: Any, prev: int, count: int | None, offset: int | None = None) -> Send:
        if self.following and count is None:
            rid = self.new_id("RequestEntries")[0]
        return super().entries_request(rid, prev, count, offset)


class IgnoresEntriesRedirectClient(Client):
    """Breaks ``raft.entries.not-leader``: takes a RequestEntries answer "not the leader" for a
    reason to read again from the same peer, never from the leader it names."""

    def on_entries_response(self, frames: list[bytes], now: int) -> list[Action]:
        try:
            status = self.d.dec["RequestEntriesResponse"](frames)["status"]
        except DecodeError:
            status = None
        if status != 0 or self.read is None:
            return super().on_entries_response(frames, now)
        self.read = None
        return self.read_to(self.read_target, now)


class LocalReadClient(Client):
    """Breaks ``raft.kv.linearizable`` (the client's side of it): answers a ``get`` at once from
    its own replica of the state machine, without a log entry and without reading the log up to
    the present, the shortcut of serving a read from local state. Its replica lags whatever
    other clients wrote since it last read, so a get returns a value older than a put that
    completed before the get began. Every peer is correct; only the linearizable check sees it."""

    def next_op(self, now: int) -> list[Action]:
        if self.current is None and self.queue and self.queue[0].op == "get":
            o = self.current = self.queue.popleft()
            return self.complete("ok", now, self.sm.kv.get(o.key))  # which goes on with the next
        return super().next_op(now)


class NoConfigClient(Client):
    """Breaks ``raft.client.request-config``: never asks the peers for the cluster state; it sends
    its updates to whichever peer its DEALER picks and relies on redirects."""

    def ask_config(self, now: int) -> list[Action]:
        self.config_deadline = None
        return []


class NoRepeatConfigClient(Client):
    """Breaks ``raft.client.repeat-config``: when a RequestConfig answer names no leader it does
    not ask again; its updates wait for an answer that may never name one."""

    def on_config_response(self, frames: list[bytes], now: int) -> list[Action]:
        out = super().on_config_response(frames, now)
        self.config_deadline = None
        return out


class DiesOnMalformedClient(Client):
    """Breaks ``raft.wire.grammar`` (E-RAFT-23: drop what does not decode): raises on the first
    malformed answer, so the process dies."""

    def malformed(self, socket: str, frames: list[bytes], err: Any) -> list[Action]:
        raise ValueError(f"malformed input: {err}")


class IgnoresRedirectClient(Client):
    """Breaks ``raft.client.broken-leader``: a refusal naming the leader is treated as one naming
    none (the second scenario): it reconnects to every peer and waits the grace period."""

    def broken_leader(self, leader: Any, now: int) -> list[Action]:
        return self.search(now)


class NewReqidRetryClient(Client):
    """Breaks ``raft.client.broken-leader-search``: sends an unanswered update again under a new
    reqid, so a cluster that did get the first applies it twice."""

    def send_update(self, now: int) -> list[Action]:
        o = self.current
        if o is not None and o.attempts > 0 and o.index is None:
            self.my_reqids.discard(o.reqid)
            o.reqid = self.new_reqid(now)
            self.my_reqids.add(o.reqid)
        return super().send_update(now)


class ReuseReqidClient(Client):
    """Breaks ``raft.reqid.unique``: every request carries the same reqid, so the cluster takes
    each new update for a repeat of the first."""

    def next_op(self, now: int) -> list[Action]:
        self.making_update = True
        try:
            return super().next_op(now)
        finally:
            self.making_update = False

    def new_reqid(self, now: int) -> bytes:
        rid = super().new_reqid(now)
        if getattr(self, "making_update", False):  # an update's reqid: the first one, again
            self.update_reqid: bytes = getattr(self, "update_reqid", None) or rid
            return self.update_reqid
        return rid


MUTANTS: dict[str, tuple[str, Callable[[NodeContext], Any], str]] = {
    "vote-twice": ("peer", VoteTwicePeer, "raft.algorithm.vote-once"),
    "skip-up-to-date": ("peer", SkipUpToDatePeer, "raft.algorithm.vote-up-to-date"),
    "forget-vote": ("peer", ForgetVotePeer, "raft.algorithm.persist-before-reply"),
    "volatile-log": ("peer", VolatileLogPeer, "raft.algorithm.persist-before-reply"),
    "commit-no-majority": ("peer", CommitNoMajorityPeer, "raft.algorithm.commit-majority"),
    "commit-old-term": ("peer", CommitOldTermPeer, "raft.algorithm.commit-current-term"),
    "no-checkpoint": ("peer", NoCheckpointPeer, "raft.algorithm.availability"),
    "keep-conflicts": ("peer", KeepConflictsPeer, "raft.algorithm.truncate-conflicts"),
    "truncate-on-append": ("peer", TruncateOnAppendPeer, "raft.algorithm.keep-matching-entries"),
    "wrong-prev-term": ("peer", WrongPrevTermPeer, "raft.safety.log-matching"),
    "ignore-higher-term": ("peer", IgnoreHigherTermPeer, "raft.algorithm.higher-term"),
    "reapply-reqid": ("peer", ReapplyReqidPeer, "raft.update.idempotent"),
    "no-debounce": ("peer", NoDebouncePeer, "raft.rpc.response-id"),
    "truncating-leader": ("peer", TruncatingLeaderPeer, "raft.safety.leader-append-only"),
    "apply-uncommitted": ("peer", ApplyUncommittedPeer, "raft.safety.state-machine-safety"),
    "fixed-timeout": ("peer", FixedTimeoutPeer, "raft.algorithm.random-election-timeout"),
    "snapshot-ahead": ("peer", SnapshotAheadPeer, "raft.safety.state-machine-safety"),
    "local-read": ("client", LocalReadClient, "raft.kv.linearizable"),
    "slow-election": ("peer", SlowElectionPeer, "raft.algorithm.random-election-timeout"),
    "accept-any-prev": ("peer", AcceptAnyPrevPeer, "raft.safety.log-matching"),
    "dies-on-malformed": ("peer", DiesOnMalformedPeer, "raft.wire.grammar"),
    "hides-leader": ("peer", HidesLeaderPeer, "raft.wire.grammar"),
    "no-retry": ("peer", NoRetryPeer, "raft.rpc.retry-after-timeout"),
    "same-message-id": ("peer", SameMessageIdPeer, "raft.wire.message-id"),
    "entries-uncommitted": ("peer", EntriesUncommittedPeer, "raft.entries.committed-only"),
    "indexless-update": ("peer", IndexlessUpdatePeer, "raft.update.index-when-committed"),
    "slow-append-retry": ("peer", SlowAppendRetryPeer, "raft.rpc.timeout-bound"),
    "reqid-not-in-entry": ("peer", ReqidNotInEntryPeer, "raft.update.reqid-in-entry"),
    "any-cluster": ("peer", AnyClusterPeer, "raft.peer.cluster-ident"),
    "ignores-stop": ("peer", IgnoresStopPeer, "raft.entries.stop-honoured"),
    "unbounded-pipeline": ("peer", UnboundedPipelinePeer, "raft.entries.pipeline"),
    "new-reqid-follow-up": ("client", NewReqidFollowUpClient, "raft.entries.follow-up"),
    "ignores-entries-redirect": ("client", IgnoresEntriesRedirectClient, "raft.entries.not-leader"),
    "no-heartbeat": ("peer", NoHeartbeatPeer, "raft.algorithm.leader-heartbeat"),
    "never-expires": ("peer", NeverExpiresPeer, "raft.update.reqid-freshness"),
    "expired-as-not-leader": ("peer", ExpiredAsNotLeaderPeer, "raft.update.expired"),
    "no-config": ("client", NoConfigClient, "raft.client.request-config"),
    "ignores-redirect": ("client", IgnoresRedirectClient, "raft.client.broken-leader"),
    "client-dies-on-malformed": ("client", DiesOnMalformedClient, "raft.wire.grammar"),
    "no-repeat-config": ("client", NoRepeatConfigClient, "raft.client.repeat-config"),
    "new-reqid-on-retry": ("client", NewReqidRetryClient, "raft.client.broken-leader-search"),
    "reuse-reqid": ("client", ReuseReqidClient, "raft.reqid.unique"),
    "skips-snapshot": ("peer", SkipsSnapshotPeer, "raft.wire.grammar"),
    "ignores-resume-offset": ("peer", IgnoresResumeOffsetPeer, "raft.snapshot.resume-offset"),
    **BROADCAST_MUTANTS,
}

# Mutants only the conformance suites judge (a wire behaviour of one peer no chaos check reads);
# tests/checkers/test_raft_checkers.py leaves them out. truncate-on-append shows only on an
# AppendEntries that arrives after a later one, which the reference leader (one request per
# follower at a time, repeated byte for byte) never causes on an ordered link.
SUITE_ONLY = ("slow-election", "dies-on-malformed", "hides-leader",
              "indexless-update", "reqid-not-in-entry",
              "ignores-redirect", "client-dies-on-malformed", "truncate-on-append")
# Mutants that crash (the suite reports harness.robustness whichever step was waiting).
CRASHES = ("dies-on-malformed", "client-dies-on-malformed")

# For the suites' proof (tests/conformance/suite_proof.py): clauses a mutant's failures may
# also be attributed to, with why; mutants no suite case can reach, with why; mutants seen
# in some dialects only.
ALSO_BREAKS: dict[str, dict[str, str]] = {
    "forget-vote": {"raft.algorithm.vote-once": "persistence is internal: what shows on the wire is the second "
                                                "vote of the term after the restart"},
    "volatile-log": {"raft.safety.log-matching": "persistence is internal: what shows on the wire is the "
                                                 "restarted follower refusing entries it acknowledged"},
    "new-reqid-on-retry": {"raft.client.broken-leader": "the update it sends the leader a refusal names carries "
                                                       "a new reqid too"},
    "no-retry": {"raft.rpc.timeout-bound": "a repeat that never comes is later than half ELECTION_TIMEOUT_MIN"},
    "ignores-redirect": {"raft.entries.not-leader": "a RequestEntries answer \"not the leader\" calls for the "
                                                    "broken-leader procedure it ignores"},
    "accept-any-prev": {"raft.algorithm.truncate-conflicts": "appending after whatever it holds, it keeps the "
                                                             "entry the leader replaced"},
    **BROADCAST_ALSO_BREAKS,
}
_CLUSTER = ("its leader's behaviour shows only when the peer under test replicates entries of several terms to "
            "followers that answer every AppendEntries; no case scripts that; the chaos checks catch it")
OUT_OF_REACH: dict[str, str] = {
    "no-checkpoint": "it differs only as a leader elected over entries it does not know to be committed, with every "
                     "client retrying an update they hold; no case plays the clients and a cluster around it; "
                     "live-after-heal catches it (scenarios/raft/explore/whole-cluster-down.yaml)",
    "wrong-prev-term": _CLUSTER,
    "truncating-leader": _CLUSTER,
    "fixed-timeout": "one fixed timeout within the range is a timeout a random draw could give; only many "
                     "elections tell, which the chaos scenarios (split votes forever) show",
    "snapshot-ahead": "what its snapshot holds shows only after it compacted with entries kept, which no case "
                      "scripts; the snapshot-state check reads the snapshots of the chaos runs",
    "ignores-resume-offset": "it differs only as a leader sending a snapshot it compacted to a follower that "
                             "lost part of the transfer; when a peer compacts is its own choice, not on the "
                             "wire, so no case can make the peer under test hold a snapshot to send; the "
                             "snapshot-resume check catches it (scenarios/raft/chaos/snapshot-restart.yaml)",
    "local-read": "its break is in the results it hands its application (a get answered from its own replica), "
                  "which the client suite does not read; the linearizable check catches it",
}
DIALECTS: dict[str, tuple[str, ...]] = {}
