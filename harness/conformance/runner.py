"""Run conformance cases: in the simulator against a node factory (reference or mutant), or
over real sockets against any implementation — a command line started fresh for every case,
or an endpoint that is already up.

Every case yields a `CaseResult` (pass / fail / error / skipped, the clause a failure is
attributed to, the reason, the decoded exchange as evidence and the command that reruns it).
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from harness.conformance.case import TIMED_KINDS, Case, load_case
from harness.conformance.conductor import Conductor, PeerPlan, PeerSocket
from harness.node import Deliver, NodeFactory
from harness.packages.base import RoleSuite
from harness.protocols import catalogue, codec
from harness.registry import package, suite
from harness.runtime import NodeFailure, Runtime, run_until
from harness.run_ids import unique_run_id
from harness.trace import VERDICT, RunInfo, TraceWriter

CONDUCTOR = "harness"
IUT = "iut"


@dataclass
class CaseResult:
    case: Case
    verdict: str  # pass | fail | error | skipped
    reason: str = ""
    clause: str = ""  # the clause a failure is attributed to
    exchange: list[dict[str, Any]] = field(default_factory=list)
    step: int | None = None
    step_line: int | None = None
    elapsed_ms: float = 0.0
    rerun: str = ""
    iut_output: str = ""

    @property
    def level(self) -> str:
        if not self.clause:
            return ""
        return catalogue(self.case.protocol)[self.clause].level.value

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case.id, "name": self.case.name, "clauses": self.case.clauses, "verdict": self.verdict,
                "clause": self.clause, "level": self.level, "reason": self.reason, "step": self.step,
                "step_line": self.step_line, "elapsed_ms": self.elapsed_ms, "rerun": self.rerun,
                "exchange": self.exchange, "iut_output": self.iut_output[-2000:]}


def load_suite(protocol: str, role: str, root: str = "scenarios", only: list[str] | None = None) -> list[Case]:
    rs = suite(protocol, role)
    peer_roles = package(protocol).peer_roles()
    cases = [load_case(p, peer_roles) for p in rs.case_paths(root)]
    if only:
        cases = [c for c in cases if c.id in only or c.name in only]
    return cases


def _peers(case: Case, rs: RoleSuite, endpoint: str, tag: str) -> dict[str, PeerSocket]:
    out = {}
    for name in case.peers:
        prefix = name.split(".")[0]
        role, stype, binds = rs.peers[prefix]
        ident = None if binds else f"{name}{tag}".encode()
        out[name] = PeerSocket(name, stype, endpoint, binds, ident, channel=rs.peer_channels.get(prefix))
    return out


class _OutputFeed:
    """Hands an implementation's standard output to the conductor, line by line (from the
    process's reader thread), once the conductor is a node of the runtime; earlier lines wait."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runtime: Runtime | None = None
        self._early: list[str] = []

    def line(self, stream: str, text: str) -> None:
        if stream != "stdout":
            return
        with self._lock:
            runtime = self._runtime
            if runtime is None:
                self._early.append(text)
                return
        runtime.command(0, CONDUCTOR, {"op": "output", "line": text})

    def attach(self, runtime: Runtime) -> None:
        with self._lock:
            self._runtime, early, self._early = runtime, self._early, []
        for text in early:
            runtime.command(0, CONDUCTOR, {"op": "output", "line": text})


def _values(case: Case, rs: RoleSuite, dialect: str, endpoint: str, alloc: Any = None) -> dict[str, Any]:
    values = dict(rs.placeholders)
    values.update(case.iut)
    port = endpoint.rsplit(":", 1)[-1]
    values.update(endpoint=endpoint, port=port, host="127.0.0.1", dialect=dialect, python=shlex.quote(sys.executable))
    for name in rs.harness_endpoints:  # endpoints the harness binds and the IUT connects to
        values[name] = alloc()
    return values


def _sim_endpoints() -> Any:
    ports = iter(range(6000, 7000))
    return lambda: f"tcp://harness:{next(ports)}"


def _live_endpoint() -> str:
    from harness.live.supervisor import free_port

    return f"tcp://127.0.0.1:{free_port()}"


def _conductor_config(case: Case, rs: RoleSuite, dialect: str, endpoint: str, tag: str, values: dict[str, Any],
                      alloc: Any) -> tuple[dict[str, Any], int]:
    """The conductor's config and the case's time budget (ns)."""
    config: dict[str, Any] = {"case": case, "codec": codec(case.protocol, dialect)}
    budget = case_budget_ns(case)
    if rs.build_peers is None:
        config["peers"] = _peers(case, rs, endpoint, tag)
        return config, budget
    plan: PeerPlan = rs.build_peers(case, values, alloc)
    config.update(plan.conductor_config())
    sends = sum(1 for s in case.steps if s.kind in ("send", "send_raw"))
    return config, budget + sends * plan.send_wait_ns


def _skip(case: Case, dialect: str) -> CaseResult | None:
    if case.dialects is not None and dialect not in case.dialects:
        return CaseResult(case, "skipped", f"only for dialect(s) {', '.join(case.dialects)}")
    return None


def _finish(case: Case, data: dict[str, Any] | None, rerun: str) -> CaseResult:
    if data is None:
        # A harness-side error judges no clause (and no severity): nothing was shown about the IUT.
        return CaseResult(case, "error", "the case did not finish (harness timeout)", "", rerun=rerun)
    return CaseResult(case, data["verdict"], data.get("reason", ""), data.get("clause", ""), data.get("exchange", []),
                      data.get("step"), data.get("step_line"), data.get("elapsed_ms", 0.0), rerun)


def case_budget_ns(case: Case) -> int:
    return sum(s.within_ns for s in case.steps if s.kind in TIMED_KINDS) + 2_000_000_000


# ---- one case on a runtime -------------------------------------------------------------------


class _CaseRun:
    """One case on a runtime (the simulator or the live one, through `harness.runtime`): the
    conductor plays the peers, the IUT is a node of the runtime or a process attached to it,
    ``restart_iut``/``kill_iut`` steps act through the runtime's faults, and a crash of the IUT
    ends the case. An IUT that is a node of the runtime has its deliveries turned into the lines
    its protocol's ``output`` prints standalone, for the conductor's ``expect_output`` steps (a
    process's own standard output reaches the conductor through `_OutputFeed`)."""

    def __init__(self, runtime: Runtime, protocol: str) -> None:
        self.runtime = runtime
        self.output = package(protocol).output
        self.result: dict[str, Any] = {}
        self.iut_failure: NodeFailure | None = None
        runtime.on_action(self._on_action)
        runtime.on_failure(self._on_failure)

    def _on_action(self, node: str, action: Any, t: int) -> None:
        if node == IUT and self.output is not None and isinstance(action, Deliver):
            line = self.output(action.kind, action.data)
            if line is not None:
                self.runtime.command(t, CONDUCTOR, {"op": "output", "line": line})
            return
        if node != CONDUCTOR:
            return
        kind = getattr(action, "kind", None)
        if kind == "case-result":
            self.result.update(action.data)
        elif kind == "iut-control":
            if action.data["action"] == "kill_iut":
                self.runtime.crash(IUT)
            else:
                self.runtime.restart(IUT)  # crashes it first if it is up

    def _on_failure(self, failure: NodeFailure) -> None:
        if failure.node == IUT and self.iut_failure is None:
            self.iut_failure = failure

    @property
    def done(self) -> bool:
        return bool(self.result) or self.iut_failure is not None


def run_case_sim(case: Case, factory: NodeFactory, *, dialect: str = "strict", seed: int = 1,
                 trace: TraceWriter | None = None) -> CaseResult:
    """Run one case in the simulator with ``factory`` (a reference node or a mutant) as the IUT."""
    from harness.sim.runtime import Simulation

    skipped = _skip(case, dialect)
    if skipped:
        return skipped
    rs = suite(case.protocol, case.role)
    endpoint = "tcp://iut:5555"
    alloc = _sim_endpoints()
    values = _values(case, rs, dialect, endpoint, alloc)
    conductor, budget = _conductor_config(case, rs, dialect, endpoint, "", values, alloc)
    sim = Simulation(seed, trace)
    run = _CaseRun(sim, case.protocol)
    sim.add_node(IUT, factory, role=case.role, config=rs.iut_config(endpoint, values))
    sim.add_node(CONDUCTOR, Conductor, role="conductor", config=conductor, start_at_ns=1_000_000)
    # Mesh nodes keep talking after the verdict: stop at it (checked between 50 ms steps).
    run_until(sim, budget, lambda: run.done)
    rerun = f"(simulation) case {case.id}"
    if run.iut_failure is not None and not run.result:
        return CaseResult(case, "fail", f"the implementation crashed: {run.iut_failure.error}", _attribute_crash(case),
                          rerun=rerun)
    return _finish(case, run.result or None, rerun)


def _attribute_crash(case: Case) -> str:
    # The step that fed it the input it died on names the clause; without one, the case's first.
    return next((s.clause for s in case.steps if s.kind == "send_raw" and s.clause), case.clauses[0])


# ---- real sockets ---------------------------------------------------------------------------


def run_case_live(case: Case, **kw: Any) -> CaseResult:
    """Run one case against a real implementation (see _run_case_live). Ports come from the OS
    and are released before use, so another process can take one in between: a case whose
    sockets hit "address already in use" is run again on fresh ports (a few times at most)."""
    from harness.live.sockets import SocketSetupError

    for attempt in range(4):
        try:
            result = _run_case_live(case, **kw)
        except SocketSetupError as e:
            if "in use" not in str(e) or attempt == 3:
                raise
            continue
        if result.verdict == "error" and "in use" in result.reason and attempt < 3 and not kw.get("endpoint"):
            continue
        return result
    raise AssertionError("unreachable")


def _run_case_live(case: Case, *, cmd: str | None = None, endpoint: str | None = None, dialect: str = "strict",
                   trace_dir: str | None = None, tag: str = "", rerun_base: str = "") -> CaseResult:
    """Run one case against a real implementation: ``cmd`` is started fresh for this case (with
    its placeholders filled) and always reaped; or ``endpoint`` is an implementation already up."""
    from harness.live.external import ExternalNode
    from harness.live.runtime import LiveRuntime
    from harness.live.supervisor import ManagedProcess, ReadyDelay, ReadyPort, SupervisorError, free_port

    skipped = _skip(case, dialect)
    if skipped:
        return skipped
    rs = suite(case.protocol, case.role)
    ep = endpoint or f"tcp://127.0.0.1:{free_port()}"
    values = _values(case, rs, dialect, ep, _live_endpoint)
    rerun = f"{rerun_base} --case {case.id}" if rerun_base else ""
    if endpoint and not cmd and case.iut:
        settings = ", ".join(f"{k}={v}" for k, v in case.iut.items())
        return CaseResult(case, "skipped", f"needs the implementation started with {settings}; "
                          "run the suite with --cmd to include it", rerun=rerun)
    if endpoint and not cmd and tag and rs.isolate_fields:
        case = isolated(case, rs.isolate_fields, tag)
    if endpoint and not cmd and rs.harness_endpoints:
        need = ", ".join("{" + n + "}" for n in rs.harness_endpoints)
        return CaseResult(case, "error", f"a {case.protocol} {case.role} connects to endpoints the harness binds afresh "
                          f"for every case ({need}): start it with --cmd, not --endpoint", "", rerun=rerun)
    iut: ExternalNode | None = None
    trace = None
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
        trace = TraceWriter(os.path.join(trace_dir, f"{case.id}.parquet"),
                            RunInfo(unique_run_id(f"conform/{case.protocol}/{case.role}/{case.id}"), 0, case.id,
                                    case.protocol))
    runtime = LiveRuntime(trace)
    run = _CaseRun(runtime, case.protocol)
    feed = _OutputFeed()
    if trace is not None and not cmd:
        trace.register_node(IUT, case.role, "external")
    try:
        if cmd:
            # The IUT binds: it must be ready before the conductor starts; else the harness
            # binds first and the IUT connects once it is up.
            ready = ReadyPort(int(values["port"]), timeout=15) if rs.iut_binds else ReadyDelay(0.0)
            iut = ExternalNode(ManagedProcess(cmd, values=values, ready=ready, name=f"iut-{case.id}",
                                              on_line=feed.line), case.role)
            runtime.attach_process(IUT, iut)
            if rs.iut_binds:
                iut.process.start()
        conductor, budget = _conductor_config(case, rs, dialect, ep, tag, values, _live_endpoint)
        runtime.add_node(CONDUCTOR, Conductor, role="conductor", config=conductor)
        feed.attach(runtime)
        runtime.start()
        if iut is not None and not rs.iut_binds:
            iut.process.start()
        run_until(runtime, runtime.now_ns + budget + 5_000_000_000, lambda: run.done)
        result = _finish(case, run.result or None, rerun)
        proc = iut.process if iut is not None else None
        if proc is not None and not proc.running and result.verdict == "pass" and "kill_iut" not in \
                [s.kind for s in case.steps]:
            result = CaseResult(case, "fail", f"the implementation exited (status {proc.returncode}) during the case",
                                case.clauses[0], result.exchange, rerun=rerun)
        if proc is not None and result.verdict != "pass":
            if not proc.running and "exited" not in result.reason:
                result.reason += f" (the implementation exited with status {proc.returncode})"
            result.iut_output = proc.tail(20)
        return result
    except SupervisorError as e:
        return CaseResult(case, "error", f"the implementation did not start: {e}", "", rerun=rerun)
    finally:
        runtime.stop()
        if iut is not None:
            iut.process.stop()
        if trace is not None:
            trace.close()


def isolated(case: Case, fields: tuple[str, ...], tag: str) -> Case:
    """A copy of the case whose text values of ``fields`` end with ``tag`` (in sends and in
    plain-value expectations), so cases sharing one implementation do not see each other."""
    import copy

    def suffix(v: Any) -> Any:
        if isinstance(v, str):
            return v + tag
        if isinstance(v, bytes):
            return v + tag.encode()
        if isinstance(v, dict) and set(v) == {"hex"}:
            return {"hex": str(v["hex"]).replace(" ", "") + tag.encode().hex()}
        return v  # other matchers (patterns, refs) are left alone

    out = copy.deepcopy(case)
    for step in out.steps:
        for f in fields:
            if f in step.fields:
                step.fields[f] = suffix(step.fields[f])
    return out


def run_suite(cases: list[Case], **kw: Any) -> list[CaseResult]:
    """Live runs of every case, each against a fresh instance when a command is given."""
    out = []
    for i, case in enumerate(cases):
        out.append(run_case_live(case, tag=f"-{i}" if kw.get("endpoint") else "", **kw))
    return out


def write_trace_verdicts(path: str, results: list[CaseResult], implementation: str) -> None:
    """One Parquet file of verdict rows (node = the IUT) for the Spark report."""
    if not results:
        return
    first = results[0].case
    with TraceWriter(path, RunInfo(unique_run_id(f"conform/{first.protocol}/{first.role}"), 0, f"conform-{first.role}",
                                   first.protocol)) as t:
        t.register_node(IUT, first.role, implementation)
        for r in results:
            for clause in r.case.clauses:
                v = r.verdict
                if r.verdict == "fail" and r.clause and clause != r.clause:
                    v = "skipped"  # the case failed on another clause: this one is not judged
                t.emit(IUT, VERDICT, 0, msg_type=r.case.id, clause=clause, verdict=v, detail=r.reason[:500])
            if r.verdict == "fail" and r.clause and r.clause not in r.case.clauses:
                t.emit(IUT, VERDICT, 0, msg_type=r.case.id, clause=r.clause, verdict="fail", detail=r.reason[:500])
