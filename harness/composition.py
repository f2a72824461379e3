"""The one run driver: a scenario becomes nodes + a runtime + workload + nemesis + checkers,
the same way in the deterministic simulator and over real sockets.

    run_sim(scenario, seed, out_dir)   one seed in simulation (virtual time)
    run_live(scenario, seed, out_dir)  once over real sockets on loopback (wall time)

Both go through `run_scenario`, which talks to the runtime only through the interface of
`harness.runtime` (add nodes, commands at a time, the nemesis's faults, run until). What a
runtime cannot do (clock skew live, say) is refused before anything starts, with a one-line
reason. Groups with a ``command`` are implementations under test, started as processes (live
only), attached to the runtime so faults and targets name them like any node, and always reaped.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Iterator, Sequence

from fault_injection import nemesis
from fault_injection.naming import codec_fields, codec_malformed
from harness import launch, live_faults
from harness.checkers.base import (
    CLOCK as CLOCK_EVENT, CRASH, ERROR, PAUSE, RESTART, RESUME, START, STALL, Checker, Event, NoNodeErrors, Observer,
    Verdict,
)
from harness.checkers.external import external_senders
from harness.checkers.wire import WireConformance
from harness.interrupts import shielded
from harness.live_observe import ObservedTraffic
from harness.probe import probed
from harness.protocols import codec
from harness.registry import package
from harness.runtime import CLOCK, RULES, NodeFailure, Runtime
from harness.scenario import Scenario, WorkloadItem
from harness.trace import RunInfo, TraceWriter

HARNESS = "harness"  # the node column of verdict rows
TAP = "harness-tap"  # the node of a package's tap (ProtocolPackage.tap), beside external nodes
LIVE_STATUS_LEAD_NS = 300_000_000  # live: ask for final status this long before the end
LIVE_CATCH_UP_NS = 5_000_000_000  # live: how long past the end to wait for the loop to read what is queued
LIVE_JUDGE_WAIT_S = 60.0  # live: how long the loop may take to get to judging (it is alive, only far behind)
LIVE_STOP_WAIT_S = 30.0  # live: how long the loop may take to end its turn and close its sockets


class RunError(RuntimeError):
    """The scenario cannot run this way (a fault the runtime cannot carry out, a command node
    in simulation, an implementation that does not start)."""


LiveRunError = RunError  # the name callers of run_live know


@dataclass
class RunResult:
    scenario: str
    seed: int
    mode: str  # "sim" or "live"
    verdicts: list[Verdict]
    stats: dict[str, Any] = field(default_factory=dict)
    trace_path: str | None = None
    result_path: str | None = None

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "seed": self.seed, "mode": self.mode, "ok": self.ok,
                "verdicts": [v.to_dict() for v in self.verdicts], "stats": self.stats,
                "trace": self.trace_path}


# ---- what a scenario is made of -------------------------------------------------------------


def build_checkers(scenario: Scenario) -> list[Checker]:
    """The checks every run gets (``no-node-errors``; ``wire-conformance`` in the run's dialect,
    last, so that it finds on each event what the others decoded already) and the scenario's own."""
    pkg = package(scenario.protocol)
    out: list[Checker] = [NoNodeErrors()]
    for name, params in scenario.checks:
        out.append(pkg.checks[name].factory(scenario, **params))
    out.append(WireConformance(scenario.protocol, scenario.dialect, pkg.capture,
                               external=external_senders(scenario, pkg.senders)))
    return out


def node_configs(scenario: Scenario, endpoint: Callable[[str, str], str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every node's (role, config), wired by the protocol's package (its `wire`)."""
    nodes: dict[str, tuple[str, dict[str, Any]]] = {}
    for g in scenario.groups.values():
        for n in g.nodes:
            cfg = dict(g.config)
            cfg.setdefault("dialect", scenario.dialect)
            if scenario.epoch_s is not None:  # a live run's wall clock (Scenario.epoch_s)
                cfg.setdefault("epoch_s", scenario.epoch_s)
            nodes[n] = (g.role, cfg)
    wire = package(scenario.protocol).wire
    if wire is not None:
        try:
            wire(nodes, endpoint)
        except ValueError as exc:  # a topology the protocol does not allow (two DCP brokers)
            raise RunError(str(exc)) from None
    return nodes


def workload_streams(scenario: Scenario, seed: int) -> list[Iterator[tuple[int, str, dict[str, Any]]]]:
    """One time-ordered stream of (time, node, command) per workload item and node.

    Arrivals are a Poisson process per node and workload item, drawn from generators derived
    from the seed, so the same seed gives the same workload. Streams are lazy: the runtime
    draws each operation when the previous one of its stream is due, so a long workload never
    sits in memory all at once. A node's operations are numbered across its workload items (the
    number makes request ids, which must not repeat when two items name the same node), in the
    order the runtime draws them, which the seed fixes too."""
    pkg = package(scenario.protocol)
    numbers: dict[str, int] = {}

    def stream(i: int, item: WorkloadItem, node: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
        rng = random.Random(f"{seed}/workload/{i}/{node}")
        t = item.start_ns
        done = 0
        while True:
            t += int(rng.expovariate(item.rate) * 1e9)
            if t >= item.end_ns or (item.limit is not None and done >= item.limit):
                return
            k = numbers.get(node, 0)
            numbers[node] = k + 1
            yield t, node, pkg.command(item.op, node, item.params, k, rng)  # type: ignore[misc]
            done += 1

    return [stream(i, item, node) for i, item in enumerate(scenario.workload) for node in item.nodes]


# Why a runtime lacks a fault kind, when it is a matter of principle rather than of a missing piece.
WHY_NOT = {CLOCK: "real processes read the host's clock, which the harness cannot move (run it in simulation)"}


def unsupported(scenario: Scenario, capabilities: frozenset[str], mode: str) -> list[str]:
    """Why this runtime cannot run the scenario's faults, one line each (empty: it can)."""
    out = []
    if len(scenario.rules) and RULES not in capabilities:
        out.append(f"message rules (drop/delay/duplicate/reorder/corrupt) cannot run {mode}: they need the ZMTP proxy")
    for f in scenario.faults:
        missing = [c for c in f.capabilities if c not in capabilities]
        if missing:
            why = "; ".join(WHY_NOT.get(c, f"the {mode} runtime cannot do {c}") for c in missing)
            out.append(f"{f.key} faults cannot run {mode}: {why}")
        elif CLOCK in f.capabilities and scenario.external:
            out += _external_clock(scenario, f.target, mode)
    return list(dict.fromkeys(out))


def _external_clock(scenario: Scenario, target: str, mode: str) -> list[str]:
    """A clock skew moves the clock of a node the harness runs; an external process reads the
    host's, which the harness cannot move: a target that names one, or may when the fault fires
    (``any``, ``leader``, ...), is refused before the run."""
    external = {n for g in scenario.external for n in g.nodes}
    named = scenario.targets.static(target)
    if named is None:
        return [f"clock_skew of {target!r} cannot run {mode}: it may name an external process when it fires, "
                f"whose clock (the host's) the harness cannot move; name nodes the harness runs"]
    hit = [n for n in named if n in external]
    return [f"clock_skew of {target!r} cannot run {mode}: {', '.join(hit)} run(s) an external command, which reads "
            "the host's clock, which the harness cannot move"] if hit else []


class _Observed:
    """The runtime as the nemesis sees it: crashes, restarts, pauses and resumes are reported to the checkers."""

    def __init__(self, runtime: Runtime, observer: Observer, settle: Callable[[], None] | None = None) -> None:
        self.runtime = runtime
        self.observer = observer
        # before a crash is reported: what the chaos proxy has still to report of the node's sends
        self.settle = settle or (lambda: None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)

    def crash(self, node: str) -> None:
        self.runtime.crash(node)
        self.settle()
        self.observer.emit(self.runtime.now_ns, node, CRASH)

    def restart(self, node: str) -> None:
        if self.runtime.is_running(node):  # restarting a running node crashes it first: the checkers hear of both
            self.runtime.crash(node)  # first: a process is dead before its crash is reported
            self.settle()
            self.observer.emit(self.runtime.now_ns, node, CRASH)
        # before the new life runs: its START and first sends come out of runtime.restart, and a
        # checker that starts a node's state afresh at RESTART must not wipe them (the trace's
        # restart row comes first as well)
        self.observer.emit(self.runtime.now_ns, node, RESTART)
        self.runtime.restart(node)

    def pause(self, node: str) -> None:  # a paused node's deadlines wait with it
        self.runtime.pause(node)
        self.observer.emit(self.runtime.now_ns, node, PAUSE)

    def resume(self, node: str) -> None:
        self.runtime.resume(node)
        self.observer.emit(self.runtime.now_ns, node, RESUME)

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None:  # timing checks allow for it
        self.runtime.set_clock(node, offset_ns, drift)
        self.observer.emit(self.runtime.now_ns, node, CLOCK_EVENT, data={"offset_ns": offset_ns, "drift": drift})


class _FinalStatus(Checker):
    """Not a check: asks the nodes of the package's ``final_status`` roles (in-process ones) for
    their holdings at ``at`` (live: 300 ms before the end, so the answer is in before the run
    stops), and asks again at once a node that starts (a restart, a late start) after that. A
    node down at ``at`` never answered, or answered from a life that ended before the run did,
    and the checks that read final state failed a node that was up at the end ("gave no status
    (down?)")."""

    name = "final-status"
    kinds = frozenset({START})

    def __init__(self, runtime: Runtime, roles: frozenset[str], at: int, end: int, skip: Container[str]) -> None:
        super().__init__()
        self.roles = roles
        self.runtime, self.at, self.end, self.skip = runtime, at, end, skip

    def ask(self, node: str, at: int) -> None:
        self.runtime.command(at, node, {"op": "status", "corr": f"{node}/status"})

    def ask_at_the_end(self, node_roles: dict[str, str]) -> None:
        for node, role in node_roles.items():
            if role in self.roles and node not in self.skip:
                self.ask(node, self.at)

    def on_event(self, ev: Event) -> None:
        if self.at <= ev.time_ns < self.end and ev.node not in self.skip:
            self.ask(ev.node, self.runtime.now_ns)

    def finish(self, end_ns: int) -> list[Verdict]:
        return []


def _settler(proxy: Any, traffic: ObservedTraffic) -> Callable[[], None]:
    """What the proxy has still to report, read and fed to the checks (on the loop thread)."""
    def settle() -> None:
        if proxy.running:
            proxy.settle()
        traffic.drain()

    return settle


def _report_failure(observer: Observer) -> Callable[[NodeFailure], None]:
    def report(f: NodeFailure) -> None:
        observer.emit(f.time_ns, f.node, ERROR, data={"error": f.error, "during": f.where,
                                                      "incarnation": f.incarnation})

    return report


# ---- the driver ------------------------------------------------------------------------------


def trace_path(out_dir: str, scenario: Scenario, seed: int, mode: str = "sim") -> str:
    return os.path.join(out_dir, slug(scenario.name), f"{mode}-seed-{seed}.parquet")


slug = launch.slug


def run_sim(scenario: Scenario, seed: int, out_dir: str | None = None, *,
            factories: dict[str, Any] | None = None, checks: bool = True,
            observers: Sequence[Checker] = ()) -> RunResult:
    """Run one seed of a scenario in simulation. ``factories`` may replace the node factory of
    some nodes (by node name) — how tests put a mutant in place of a reference node.
    ``checks=False`` runs without probes and checkers (benchmarks of the bare simulation).
    ``observers`` see the run's events like checkers (``explore`` collects coverage so)."""
    return run_scenario(scenario, seed, "sim", out_dir, factories=factories, checks=checks, observers=observers)


def run_live(scenario: Scenario, seed: int, out_dir: str, *, factories: dict[str, Any] | None = None,
             observers: Sequence[Checker] = (), capture: str | None = None) -> RunResult:
    """Run a scenario once over real sockets on loopback (its reference nodes in this
    process, its ``command`` groups as processes). ``capture``: record the run's loopback
    traffic into this pcap file (harness.capture.sniff; `capture_path` is beside the trace)."""
    return run_scenario(scenario, seed, "live", out_dir, factories=factories, observers=observers, capture=capture)


def capture_path(out_dir: str, scenario: Scenario, seed: int) -> str:
    """Where ``run --live --capture`` without a path saves the run's traffic: beside its trace."""
    return os.path.join(out_dir, slug(scenario.name), f"live-seed-{seed}.pcap")


def run_scenario(scenario: Scenario, seed: int, mode: str, out_dir: str | None = None, *,
                 factories: dict[str, Any] | None = None, checks: bool = True,
                 observers: Sequence[Checker] = (), capture: str | None = None) -> RunResult:
    pkg = package(scenario.protocol)
    if mode == "live" and scenario.epoch_s is None:  # wall-clock stamps (reqids) must be fresh to a real peer
        scenario = dataclasses.replace(scenario, epoch_s=int(time.time()))
    runtime, trace, tpath = _make_runtime(scenario, seed, mode, out_dir)
    reasons = unsupported(scenario, runtime.capabilities, mode)
    if mode == "sim" and scenario.external:
        reasons.append(f"group {scenario.external[0].name!r} runs an external command: run the scenario --live")
    if capture is not None and mode != "live":
        reasons.append("a capture records real traffic: run the scenario --live")
    processes: dict[str, Any] = {}
    recorder = None
    placement: live_faults.ProxyPlacement | None = None
    traffic: ObservedTraffic | None = None
    try:
        if reasons:
            raise RunError("; ".join(reasons))
        endpoints = launch.EndpointAllocator(mode)
        configs = node_configs(scenario, endpoints)
        if capture is not None:  # started before any node, on every port the run binds (peers connect to those)
            from harness.capture.sniff import LiveCapture  # noqa: PLC0415

            recorder = LiveCapture(capture, [int(e.rsplit(":", 1)[1]) for e in endpoints.assigned.values()]).start()
        roles = {n: r for n, (r, _) in configs.items()}
        external = frozenset(n for g in scenario.external for n in g.nodes)
        tap = pkg.tap(configs, external) if mode == "live" and pkg.tap is not None and external else None
        if tap is not None:
            roles[TAP] = tap[0]
        end = scenario.duration_ns + scenario.settle_ns
        lead = 1 if mode == "sim" else LIVE_STATUS_LEAD_NS
        final_status = _FinalStatus(runtime, frozenset(pkg.final_status), end - lead, end, processes)
        observer = Observer(build_checkers(scenario) + list(observers) + [final_status] if checks else [],
                            codec(scenario.protocol, scenario.dialect), roles)
        runtime.on_failure(_report_failure(observer))
        if mode == "live":  # timers the loop fired late: the timing checks excuse the node that much
            runtime.on_stall(lambda node, t, late: observer.emit(t, node, STALL, data={"late_ns": late}))  # type: ignore[attr-defined]
        clock: Callable[[], int] = lambda: runtime.now_ns  # noqa: E731 - virtual or wall time
        if mode == "live":  # what a node does is stamped at its input, as in simulation (harness.live.node_io)
            clock = runtime.input_time  # type: ignore[attr-defined]
        settle: Callable[[], None] | None = None
        if mode == "live" and live_faults.needs_proxy(scenario):
            placement = live_faults.place_for_run(scenario, pkg, configs, endpoints.assigned, runtime, processes,
                                                  seed)
            if live_faults.observed_nodes(scenario):  # external nodes' traffic, to the checkers and the trace
                notes = (codec(scenario.protocol, scenario.dialect), pkg.wire_notes) if pkg.wire_notes else None
                traffic = ObservedTraffic(runtime, observer if checks else None, trace, scenario.record_frames, notes,
                                          external)
                placement.proxy.on_seen = traffic.push
                runtime.catch_up_with(traffic.pending, traffic.drain)  # type: ignore[attr-defined]
                settle = _settler(placement.proxy, traffic)
        for name, (role, cfg) in configs.items():
            group = scenario.group_of(name)
            if group.command:
                try:
                    processes[name] = launch.external_node(scenario, group, name, role, seed, endpoints, out_dir,
                                                           config=cfg,
                                                           advertised=placement.advertised if placement else {})
                except ValueError as e:  # a placeholder with no value here: nothing has started yet
                    raise RunError(f"group {group.name!r}: {e}") from None
                runtime.attach_process(name, processes[name])  # type: ignore[attr-defined]
                continue
            factory = (factories or {}).get(name)
            if factory is not None:
                impl = getattr(factory, "implementation", "mutant")
            else:
                factory = pkg.mutants[group.mutant][1] if group.mutant else pkg.roles[role].factory
                impl = "reference"
            runtime.add_node(name, probed(factory, observer, clock) if checks else factory, role=role, config=cfg,
                             implementation=impl if group.implementation == "reference" else group.implementation,
                             start_at_ns=group.start_ns)
        if tap is not None:
            role, factory, cfg = tap
            runtime.add_node(TAP, probed(factory, observer, clock) if checks else factory, role=role, config=cfg)
        for stream in workload_streams(scenario, seed):
            runtime.command_stream(stream)  # type: ignore[attr-defined]
        resolve = scenario.targets.resolver(runtime, random.Random(f"{seed}/nemesis"))
        nemesis.install(scenario.faults, _Observed(runtime, observer, settle), resolve)  # type: ignore[arg-type]
        final_status.ask_at_the_end({name: roles[name] for name in scenario.node_names})  # last, after the rest
        if placement is not None:
            placement.proxy.start()
        for proc in processes.values():
            launch.start_process(proc)
        runtime.run(end)
        behind: int | None = 0
        catch_up = min(LIVE_CATCH_UP_NS, scenario.duration_ns)
        if mode == "live":  # judge what reached the nodes by the end, not what the loop had read by then
            behind = runtime.catch_up(end, catch_up)  # type: ignore[attr-defined]
        verdicts = _judged(runtime, observer, traffic, mode)
        verdicts += launch.process_verdicts(processes)
        note = overload_note(runtime, behind, catch_up) if mode == "live" else ""
        for v in verdicts if note else ():
            if not v.ok:
                v.detail += note
        stats = _stats(runtime, observer, endpoints)
        if mode == "live":
            stats["catch_up_ms"] = None if behind is None else round(behind / 1e6, 1)
        if trace is not None:
            now = runtime.now_ns
            for v in verdicts:
                trace.verdict(HARNESS, now, v.check, "pass" if v.ok else "fail", v.clause or v.check, v.detail)
    finally:
        # Always: stop the runtime (then the proxy: stopped first, it would cut connections under
        # nodes still running), reap every process, flush the trace (also on abort; a stop
        # signal waits until that is done).
        with shielded():
            try:
                if placement is not None:
                    live_faults.take_rows_back(placement, runtime)
                stop = getattr(runtime, "stop", None)
                if stop is not None:  # a loop far behind finishes its turn first (an overloaded host: seconds)
                    stop(**({"timeout": LIVE_STOP_WAIT_S} if mode == "live" else {}))
            finally:
                if placement is not None:
                    live_faults.stop_proxy(placement, trace)
                if traffic is not None:  # a run that ended before its loop drained them: rows only
                    traffic.flush_rows()
                for proc in processes.values():
                    proc.process.stop()
                if recorder is not None:
                    summary = recorder.stop()
                if trace is not None:
                    trace.close()
    if placement is not None:  # final counts: the proxy has stopped, its reports are in
        stats["proxy"] = live_faults.proxy_stats(placement.proxy)
    if traffic is not None:
        stats["observed_traffic"] = traffic.summary()
    if recorder is not None:
        stats["capture"] = {"tool": summary.tool, "path": summary.path, "packets": summary.packets,
                            "dropped": summary.dropped}
    result = RunResult(scenario.name, seed, mode, verdicts, stats, tpath)
    if out_dir is not None:
        result.result_path = os.path.join(out_dir, slug(scenario.name), f"{mode}-seed-{seed}.json")
        with open(result.result_path, "w") as f:
            json.dump(result.to_dict(), f, indent=2, default=str)
    return result


def _judged(runtime: Any, observer: Observer, traffic: "ObservedTraffic | None", mode: str) -> list[Verdict]:
    """The run's verdicts, judged on the runtime's thread: a live loop far behind (the catch-up
    gave up) may take seconds to get to it, and a run that crashed on the wait would lose them."""
    judge = lambda: _judge(observer, traffic, runtime.now_ns)  # noqa: E731
    if mode != "live":
        return runtime.call(judge)  # type: ignore[no-any-return]
    try:
        return runtime.call(judge, timeout=LIVE_JUDGE_WAIT_S)  # type: ignore[no-any-return]
    except concurrent.futures.TimeoutError:
        raise RunError(f"the harness's loop did not get to judging the run within {LIVE_JUDGE_WAIT_S:g} s of "
                       "the end: a node's handler is stuck, or the host is far too slow") from None


def _judge(observer: Observer, traffic: "ObservedTraffic | None", now: int) -> list[Verdict]:
    """The verdicts, once the checkers have what the proxy saw until now (on the loop thread)."""
    if traffic is None:
        return observer.finish(now)
    traffic.close()
    return observer.finish(now) + traffic.verdicts()


def _make_runtime(scenario: Scenario, seed: int, mode: str, out_dir: str | None
                  ) -> tuple[Any, TraceWriter | None, str | None]:
    if mode not in ("sim", "live"):
        raise ValueError(f"mode must be sim or live, not {mode!r}")
    trace = tpath = None
    if mode == "live" and out_dir is None:
        raise ValueError("a live run writes its trace: give out_dir")
    if out_dir is not None:
        from harness.run_ids import unique_run_id  # noqa: PLC0415

        tpath = trace_path(out_dir, scenario, seed, mode)
        run_id = f"{scenario.name}/{seed}" if mode == "sim" else unique_run_id(f"{scenario.name}/live-{seed}")
        trace = TraceWriter(tpath, RunInfo(run_id, seed, scenario.name, scenario.protocol))
        trace.register_node(HARNESS, HARNESS, "")
    if mode == "sim":
        from harness.sim.network import LatencyModel  # noqa: PLC0415
        from harness.sim.runtime import Simulation  # noqa: PLC0415

        lat = scenario.latency
        links = {(link["from"], link["to"]): link["latency"] for link in lat.get("links", []) or []}
        latency = LatencyModel(lat["default"], links) if "default" in lat else LatencyModel(links=links)
        return Simulation(seed, trace, latency=latency, rules=scenario.rules, record_frames=scenario.record_frames,
                          fields_of=codec_fields(scenario.protocol, scenario.dialect),
                          malformed=codec_malformed(scenario.protocol)), trace, tpath
    from harness.live.runtime import LiveRuntime  # noqa: PLC0415

    return LiveRuntime(trace, seed=seed), trace, tpath


def _stats(runtime: Any, observer: Observer, endpoints: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {"observed": observer.count, "failures": [f.describe() for f in runtime.failures]}
    sim_stats = getattr(runtime, "stats", None)
    if sim_stats is not None:
        stats.update(sent=sim_stats.sent, delivered=sim_stats.delivered, dropped=dict(sim_stats.dropped),
                     events=sim_stats.events, virtual_ns=runtime.now_ns)
    else:
        stats.update(wall_s=round(runtime.now_ns / 1e9, 3), endpoints=endpoints.assigned)
        stalls = getattr(runtime, "stalls", None)
        if stalls is not None:
            stats["stalls"] = {"count": stalls.count, "worst_ms": round(stalls.worst_ns / 1e6, 1),
                               "worst_node": stalls.worst_node, "worst_at_ms": round(stalls.worst_at_ns / 1e6, 1)}
        collections = getattr(runtime, "gc_collections", None)
        if collections is not None:  # the harness process's garbage collections on its loop thread
            # (its loop may still run: the longest is read first, and the sum it is part of after it)
            longest = collections.longest
            stats["collections"] = {"count": collections.count, "cpu_ms": round(collections.spent / 1e6, 1),
                                    "longest_ms": round(longest / 1e6, 1)}
    return stats


# A live run whose loop held an in-process node this long past its timer was short of CPU: every
# bound in the run stretched by as much, and what its failures say may be the harness's lateness.
OVERLOADED_NS = 250_000_000


def overload_note(runtime: Any, behind: int | None = 0, waited_ns: int = LIVE_CATCH_UP_NS) -> str:
    """What a failed verdict of a live run adds when the harness itself ran far behind ("" if not):
    its loop held a node's timer long past due, or it still had input unread ``waited_ns`` after
    the end (``behind`` None, from `EventLoop.catch_up`)."""
    stalls = getattr(runtime, "stalls", None)
    late = stalls is not None and stalls.worst_ns >= OVERLOADED_NS
    if not late and behind is not None:
        return ""
    said = []
    if late:
        said.append(f"its loop held {stalls.worst_node} {stalls.worst_ns / 1e6:.0f} ms past a timer at "
                    f"{stalls.worst_at_ns / 1e6:.0f} ms ({stalls.count} stalls in all)")
    if behind is None:
        said.append(f"{waited_ns / 1e9:.1f} s after the end it still had input unread, which was not judged")
    why = ("the host was short of CPU for this many in-process nodes" if late else
           "a host far too slow for this many in-process nodes, or an implementation flooding them")
    return f" [the harness itself ran late in this run: {'; '.join(said)}; {why}: rerun on a quieter host before " \
           "trusting this failure]"
