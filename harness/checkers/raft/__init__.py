"""Raft checkers: safety properties of the Raft paper and of the protocol's RPCs, judged from
what the probes observe (docs/raft.md lists what each reads)."""

from harness.checkers.raft.broadcasts import BroadcastEntries, BroadcastHeartbeat, BroadcastState
from harness.checkers.raft.clients import BroadcastUrl, RepeatConfig, RequestConfig
from harness.checkers.raft.commits import CommitRule, CommittedDurable, LeaderCompleteness
from harness.checkers.raft.elections import ElectionSafety, RaftChecker, TermUpdate, VoteOnce
from harness.checkers.raft.liveness import LiveAfterHeal
from harness.checkers.raft.logs import LeaderAppendOnly, LogMatching, StateMachineSafety
from harness.checkers.raft.redirects import EntriesFollowUp, FollowsEntriesRedirect
from harness.checkers.raft.requests import (
    ClusterIdent, EntriesFromPrev, EntriesPipeline, EntriesStop, MessageIds, UpdateReqids,
)
from harness.checkers.raft.snapshots import SnapshotResume, SnapshotState
from harness.checkers.raft.timing import LeaderHeartbeat
from harness.checkers.raft.updates import UpdateExpiry, UpdateOnce

__all__ = [
    "BroadcastEntries", "BroadcastHeartbeat", "BroadcastState", "BroadcastUrl", "ClusterIdent", "CommitRule",
    "CommittedDurable", "ElectionSafety", "EntriesFollowUp", "EntriesFromPrev", "EntriesPipeline", "EntriesStop",
    "FollowsEntriesRedirect", "LeaderAppendOnly", "LeaderCompleteness", "LeaderHeartbeat", "LiveAfterHeal",
    "LogMatching", "MessageIds", "RaftChecker", "RepeatConfig", "RequestConfig", "SnapshotResume", "SnapshotState",
    "StateMachineSafety", "TermUpdate", "UpdateExpiry", "UpdateOnce", "UpdateReqids", "VoteOnce",
]
