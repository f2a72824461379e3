"""The Raft package's checks: each a checker of `harness.checkers.raft` with its parameters
taken from the scenario (the number of peers, when the last fault heals), and ``linearizable``,
the linearizability checker (`harness.checkers.linearizability`) on the clients' key-value
history (`harness.packages.raft.history`)."""

from __future__ import annotations

from typing import Any, Callable

from fault_injection import nemesis
from harness.checkers import raft as checkers
from harness.checkers.external import corrupts, external_nodes, noting_external
from harness.checkers.base import COMMAND, DELIVER, NOTE, RECV, SEND, Event, Verdict
from harness.checkers.linearizability import Linearizable
from harness.packages.base import Check, Setting, as_ms, as_positive_int, partition_spans
from harness.packages.raft.foreign import ForeignWrites
from harness.packages.raft.history import KVHistory
from reference_nodes.raft.common import (
    cluster_ident,
    DEFAULT_CLIENT_HEARTBEAT_MS, DEFAULT_ELECTION_GRACE_MS, DEFAULT_ELECTION_MIN_MS, DEFAULT_ENTRIES_PIPELINE, DEFAULT_EPOCH_S,
    DEFAULT_UPDATE_TTL_MS,
)

PEER_COUNTED = (checkers.CommitRule, checkers.LeaderCompleteness, checkers.CommittedDurable, checkers.UpdateOnce,
                checkers.BroadcastState)
CLIENT_TIMED = (checkers.RequestConfig, checkers.RepeatConfig)


def observed_leaders(scenario: Any) -> dict[str, Any]:
    """The external peers whose leader requests the chaos proxy reports (two or more of them and
    observation on: it stands between them), and the partition spans of the file (a leader's
    requests wait unread while one holds)."""
    external = external_nodes(scenario, "peer")
    if len(external) < 2 or not scenario.observe:
        return {}
    return {"external": external, "partitions": partition_spans(scenario)}


def peer_count(scenario: Any) -> int:
    return sum(len(g.nodes) for g in scenario.groups.values() if g.role == "peer")


def last_heal_ns(scenario: Any) -> int:
    """When the last fault of the scenario is over: the end of its last partition, pause or slow
    link, its last restart (or crash without one), its last clock change. Message rules apply
    all the time and are not counted."""
    heal = 0
    for f in scenario.faults:
        end = getattr(f, "end", None)
        if end is None:  # a node that stays down, a clock that stays skewed: over once it happened;
            # a partition, pause or slow link that never ends: never over
            end = f.start if isinstance(f, (nemesis.Crash, nemesis.ClockSkew)) else 1 << 62
        heal = max(heal, end)
    return heal


def election_mins(scenario: Any) -> dict[str, int]:
    """Each peer's ELECTION_TIMEOUT_MIN in ms, as its group configures it (default 200)."""
    return role_config(scenario, "peer", "election_min_ms", DEFAULT_ELECTION_MIN_MS)


def clock_faults(scenario: Any, node: str) -> list[Any]:
    """The scenario's clock faults that may strike ``node``: those naming it (as a node, group,
    role or glob) and those whose target is known only when they fire (``leader``, ``random``)."""
    out = []
    for f in scenario.faults:
        if isinstance(f, nemesis.ClockSkew):
            hit = scenario.targets.static(f.target)
            if hit is None or node in hit:
                out.append(f)
    return out


def role_config(scenario: Any, role: str, key: str, default: int) -> dict[str, int]:
    """Each node of ``role``: the int its group configures as ``key`` (``default`` if none)."""
    return {n: int(g.config.get(key, default)) for g in scenario.groups.values() if g.role == role for n in g.nodes}


def peer_clocks(scenario: Any, role: str = "peer") -> dict[str, Any]:
    """What a timing check needs of the clock faults each node of ``role`` may undergo: its
    slowest clock rate (1 + its most negative drift) and when its clock may change."""
    nodes = [n for g in scenario.groups.values() if g.role == role for n in g.nodes]
    faults = {n: clock_faults(scenario, n) for n in nodes}
    return {"slowest": {n: 1.0 + min([0.0] + [f.drift for f in fs]) for n, fs in faults.items() if fs},
            "clock_changes": {n: tuple(f.at for f in fs) for n, fs in faults.items() if fs}}


def peer_expiry(scenario: Any) -> dict[str, Any]:
    """Each peer's REQUEST_UPDATE_TTL and epoch base as configured, and how far the scenario's clock
    faults may move its clock (the sums of their offsets and drifts)."""
    peers = [(n, g.config) for g in scenario.groups.values() if g.role == "peer" for n in g.nodes]
    run_epoch = getattr(scenario, "epoch_s", None) or DEFAULT_EPOCH_S  # live: what the nodes were given
    slack = {}
    for n, _ in peers:
        faults = clock_faults(scenario, n)
        if faults:
            slack[n] = (sum(abs(f.offset) for f in faults), sum(abs(f.drift) for f in faults))
    return {"ttl_ms": {n: int(c.get("update_ttl_ms", DEFAULT_UPDATE_TTL_MS)) for n, c in peers},
            "epoch_s": {n: int(c.get("epoch_s", run_epoch)) for n, c in peers}, "clock_slack": slack}


def _share(scenario: Any, checker: Any) -> Any:
    """The Raft checkers of one run share one tracker (each event classified once): the first
    built for a run owns it, the others join. `harness.composition.build_checkers` builds a
    run's checkers one after the other, once per check of the scenario; a group holding as many
    checkers as the scenario has checks belongs to the previous run."""
    group = scenario.__dict__.get("_raft_checkers")
    if group is None or len(group) >= len(scenario.checks):
        group = scenario.__dict__["_raft_checkers"] = []
    owner = next((c for c in group if isinstance(c, checkers.RaftChecker)), None)
    if owner is not None and isinstance(checker, checkers.RaftChecker):
        checker.join(owner)
    group.append(checker)
    return checker


def _factory(cls: type) -> Callable[..., Any]:
    def make(scenario: Any, **params: Any) -> Any:
        if issubclass(cls, checkers.RaftChecker):  # whether a receipt is proof of what was sent
            params["receipts"] = not corrupts(scenario)
        if cls in PEER_COUNTED:
            params["peers"] = peer_count(scenario)
        elif cls is checkers.EntriesPipeline:
            params["pipelines"] = role_config(scenario, "peer", "entries_pipeline", DEFAULT_ENTRIES_PIPELINE)
        elif cls is checkers.FollowsEntriesRedirect:
            params["peers"] = frozenset(n for g in scenario.groups.values() if g.role == "peer" for n in g.nodes)
        elif cls is checkers.LiveAfterHeal:
            params["heal_ns"] = last_heal_ns(scenario)
        elif cls is checkers.UpdateExpiry:
            params = {**peer_expiry(scenario), **params}
        elif cls is checkers.LeaderHeartbeat:
            params = {"election_min": election_mins(scenario), **peer_clocks(scenario), **observed_leaders(scenario),
                      **params}
        elif cls is checkers.BroadcastHeartbeat:
            params = {"interval": role_config(scenario, "peer", "client_heartbeat_ms", DEFAULT_CLIENT_HEARTBEAT_MS),
                      **peer_clocks(scenario), **params}
        elif cls is checkers.ClusterIdent:
            params = {"idents": {n: cluster_ident(g.config.get("cluster", "")) for g in scenario.groups.values()
                                 if g.role == "peer" for n in g.nodes}, **params}
        elif cls in CLIENT_TIMED:
            params = {**peer_clocks(scenario, "client"), **params}
            if "default_within_ms" not in params:  # E-RAFT-14: a client waits SERVER_ELECTION_GRACE_MS to ask again
                grace = role_config(scenario, "client", "election_grace_ms", DEFAULT_ELECTION_GRACE_MS)
                params["within"] = {n: max(1000, 2 * ms) for n, ms in grace.items()}
        checker = _share(scenario, cls(**params))
        unseen = unseen_of_external(cls, scenario, params)
        return noting_external(checker, scenario, ("peer",), unseen) if unseen else checker

    return make


# What a check leaves out of an external peer's sends, which the chaos proxy (or the tap) sees
# only after they left it: the verdict names it (harness.checkers.external.noting_external).
UNSEEN_OF_EXTERNAL = {
    checkers.LeaderHeartbeat: "the gaps between their AppendEntries (the chaos proxy's read time bounds a send "
                              "from above only)",
    checkers.BroadcastHeartbeat: "the gaps between their StateBroadcasts (heard after they were sent)",
    checkers.BroadcastEntries: "whether their StateBroadcasts carry what they apply (their sends are seen from "
                               "outside, after they left them)",
}


def unseen_of_external(cls: type, scenario: Any, params: dict[str, Any]) -> str | None:
    """What a check's verdict names as not judged of the external peers (UNSEEN_OF_EXTERNAL); a
    `LeaderHeartbeat` given the external peers the proxy observes judges their requests to each
    other, and leaves out only those to the harness's own peers, which the proxy does not see."""
    if cls is checkers.LeaderHeartbeat and params.get("external"):
        ours = {n for g in scenario.groups.values() if g.role == "peer" for n in g.nodes} - params["external"]
        return "the gaps between their AppendEntries to the harness's peers (not observed)" if ours else None
    return UNSEEN_OF_EXTERNAL.get(cls)


def _check(name: str, cls: type, params: dict[str, Setting] | None = None) -> Check:
    return Check(name, _factory(cls), params or {}, doc=cls.__doc__ or "", clause=cls.clause, checker=cls)


def _within(what: str) -> dict[str, Setting]:
    return {"within": Setting("default_within_ms", as_ms, f"bound {what} (default 1s, or twice the client's "
                                                          f"election_grace when longer)")}


LINEARIZABLE_CLAUSE = "raft.kv.linearizable"


class KVLinearizable(Linearizable):
    """`Linearizable` over a `KVHistory`, which also adds, at the end, the operations still
    waiting to start or complete."""

    def __init__(self, foreign: ForeignWrites | None = None, **params: Any) -> None:
        self.history = KVHistory()
        self.foreign = foreign  # writes of external clients (runs that have some)
        kinds, roles = (COMMAND, DELIVER, NOTE), ("client",)
        if foreign is not None:
            kinds, roles = (*kinds, SEND, RECV), (*roles, "peer")
        super().__init__(self.history, kinds=kinds, roles=roles, clause=LINEARIZABLE_CLAUSE, **params)

    def on_event(self, ev: Event) -> None:
        if self.foreign is not None and (ev.kind == SEND or ev.kind == RECV):
            self.foreign.on_event(ev)
        else:
            super().on_event(ev)

    def finish(self, end_ns: int) -> list[Verdict]:
        self.entries.extend(self.history.unfinished())
        foreign = self.foreign.operations() if self.foreign is not None else []
        self.entries.extend(foreign)
        verdicts = super().finish(end_ns)
        if self.foreign is not None:
            for v in verdicts:
                v.detail += (f" (with {len(foreign)} write(s) of external clients seen on the wire, each of unknown "
                             f"outcome from when the wire first showed it)")
        return verdicts


def _linearizable(scenario: Any, **params: Any) -> Linearizable:
    return _share(scenario, KVLinearizable(foreign=ForeignWrites.for_scenario(scenario), **params))


CHECKS = {
    "election-safety": _check("election-safety", checkers.ElectionSafety),
    "vote-once": _check("vote-once", checkers.VoteOnce),
    "term-update": _check("term-update", checkers.TermUpdate, {
        "grace": Setting("grace_ms", as_ms, "how long a peer may take to adopt a higher term (default 0ms)")}),
    "log-matching": _check("log-matching", checkers.LogMatching),
    "leader-append-only": _check("leader-append-only", checkers.LeaderAppendOnly),
    "leader-completeness": _check("leader-completeness", checkers.LeaderCompleteness),
    "state-machine-safety": _check("state-machine-safety", checkers.StateMachineSafety),
    "committed-durable": _check("committed-durable", checkers.CommittedDurable),
    "snapshot-state": _check("snapshot-state", checkers.SnapshotState),
    "snapshot-resume": _check("snapshot-resume", checkers.SnapshotResume),
    "commit-rule": _check("commit-rule", checkers.CommitRule),
    "update-once": _check("update-once", checkers.UpdateOnce),
    "leader-heartbeat": _check("leader-heartbeat", checkers.LeaderHeartbeat, {
        "tolerance": Setting("tolerance_ms", as_ms, "slack on ELECTION_TIMEOUT_MIN / 2 for a live run's "
                                                    "scheduling (default 90ms)"),
        "external_slack": Setting("external_slack_ms", as_ms, "more slack for an external leader, whose requests are "
                                  "seen when the chaos proxy reads them (default half the bound)")}),
    "message-ids": _check("message-ids", checkers.MessageIds),
    "cluster-ident": _check("cluster-ident", checkers.ClusterIdent),
    "entries-stop": _check("entries-stop", checkers.EntriesStop),
    "entries-from-prev": _check("entries-from-prev", checkers.EntriesFromPrev),
    "entries-pipeline": _check("entries-pipeline", checkers.EntriesPipeline),
    "follows-entries-redirect": _check("follows-entries-redirect", checkers.FollowsEntriesRedirect, {
        "within": Setting("within_ms", as_ms, "judge the first RequestEntries sent this soon after the redirect "
                                              "(default 50ms)")}),
    "entries-follow-up": _check("entries-follow-up", checkers.EntriesFollowUp),
    "update-expiry": _check("update-expiry", checkers.UpdateExpiry),
    "update-reqids": _check("update-reqids", checkers.UpdateReqids),
    "broadcast-state": _check("broadcast-state", checkers.BroadcastState),
    "broadcast-entries": _check("broadcast-entries", checkers.BroadcastEntries),
    "broadcast-heartbeat": _check("broadcast-heartbeat", checkers.BroadcastHeartbeat, {
        "tolerance": Setting("tolerance_ms", as_ms, "slack on CLIENT_HEARTBEAT_INTERVAL for a live run's scheduling "
                                                    "(default 90ms)")}),
    "broadcast-url": _check("broadcast-url", checkers.BroadcastUrl),
    "request-config": _check("request-config", checkers.RequestConfig, _within("on the first RequestConfig")),
    "repeat-config": _check("repeat-config", checkers.RepeatConfig,
                            _within("on the next RequestConfig after an answer naming no leader")),
    "live-after-heal": _check("live-after-heal", checkers.LiveAfterHeal, {
        "within": Setting("within_ms", as_ms, "the bound after the last heal (default 5s)"),
        "value": Setting("within_ms", as_ms, "the bound, written as 'live-after-heal: 5s'")}),
    "linearizable": Check(
        "linearizable", _linearizable, {
            "max_steps": Setting("max_steps", as_positive_int, "model steps the search may take (5,000,000)"),
            "shrink_steps": Setting("shrink_steps", as_positive_int,
                                    "model steps to shrink a counterexample (2,000,000)")},
        doc="The clients' put/get/cas/delete operations, invoked at their command and completed at their "
            "delivery on the run's clock (timed-out ones of unknown outcome), are linearizable against a "
            "key-value map: harness.checkers.linearizability, each key on its own. Fails with a minimal "
            "counterexample, or as undecided when the step budget runs out.",
        clause=LINEARIZABLE_CLAUSE, checker=KVLinearizable),
}

# Every MUST check; a check of a SHOULD runs only where a scenario names it (Checker.level).
DEFAULT_CHECKS = tuple(name for name, c in CHECKS.items() if c.checker is None or c.checker.level == "MUST")
