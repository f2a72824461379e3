"""Run conformance cases: in the simulator against a node factory (reference or mutant), or
over real sockets against any implementation — a command line started fresh for every case,
or an endpoint that is already up.

Every case yields a `CaseResult` (pass / fail / error / skipped, the clause a failure is
attributed to, the reason, the decoded exchange as evidence and the command that reruns it).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from harness.conformance import START_TIMEOUT_S
from harness.conformance.case import TIMED_KINDS, Case, load_case
from harness.conformance.conductor import IUT_CONNECTED, IUT_CRASHED, ROBUSTNESS, Conductor
from harness.conformance.plan import PeerPlan, PeerSocket
from harness.interrupts import shielded
from harness.launch import zmq_harness_command
from harness.node import Deliver, NodeFactory
from harness.packages.base import RoleSuite
from harness.protocols import catalogue, codec
from harness.registry import package, suite
from harness.runtime import NodeFailure, Runtime, run_until
from harness.run_ids import unique_run_id
from harness.trace import VERDICT, RunInfo, TraceWriter

CONDUCTOR = "harness"
IUT = "iut"
NOT_STARTED = "the implementation did not start"  # how the reason of such a case begins
# A case failed while the harness's own timers ran this late or later is not judged: its waits and
# sends were not what it scripts (a worker's pings 100 ms apart held up past a broker's lawful
# expiry). Live, the conductor keeps a timer every LATENESS_TICK_NS to see such a stall even
# while it only waits; a case so spoiled is run again, LATE_RERUNS times at most.
HARNESS_LATE = "not judged: the harness ran late"  # how the reason of such a case begins
HARNESS_LATE_MS = 100.0
# ... unless the implementation itself sent the harness more than this in the case (no shipped case
# needs a tenth of it): the harness fell behind its traffic, and the verdict stands.
FLOOD_MESSAGES = 2_000
LATENESS_TICK_NS = 20_000_000
LATE_RERUNS = 2
START_FAILURES_TO_GIVE_UP = 3  # a suite stops after this many cases in a row whose IUT did not start


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
    harness_late_ms: float = 0.0  # how late the conductor's timers fired at worst (live)
    received: int = 0  # messages the conductor took in from the implementation

    @property
    def level(self) -> str:
        if not self.clause:
            return ""
        if self.clause == ROBUSTNESS:
            return "MUST"
        return catalogue(self.case.protocol)[self.clause].level.value

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case.id, "name": self.case.name, "clauses": self.case.clauses, "verdict": self.verdict,
                "clause": self.clause, "level": self.level, "reason": self.reason, "step": self.step,
                "step_line": self.step_line, "elapsed_ms": self.elapsed_ms, "rerun": self.rerun,
                "exchange": self.exchange, "iut_output": self.iut_output[-2000:],
                "harness_late_ms": self.harness_late_ms, "received": self.received}


def load_suite(protocol: str, role: str, root: str | None = None, only: list[str] | None = None) -> list[Case]:
    """The cases of a suite, from ``root`` (default: the suites shipped with the package)."""
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
    values.update(endpoint=endpoint, port=port, host="127.0.0.1", dialect=dialect, python=shlex.quote(sys.executable),
                  zmq_harness=zmq_harness_command())
    # endpoints the harness binds and the IUT connects to, then further ones the IUT binds
    for name in (*rs.harness_endpoints, *rs.iut_endpoints):
        values[name] = alloc()
    if rs.fill_values is not None:
        rs.fill_values(values)
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
                      data.get("step"), data.get("step_line"), data.get("elapsed_ms", 0.0), rerun,
                      harness_late_ms=float(data.get("harness_late_ms", 0.0)), received=int(data.get("received", 0)))


def judged_despite_lateness(result: CaseResult) -> CaseResult:
    """A failure seen while the harness ran `HARNESS_LATE_MS` late or more becomes an error (not
    judged), which says what would have failed; a crash of the implementation stays a failure
    (no lateness of the harness makes a process exit), and a pass stays a pass (lateness only
    stretches the harness's waits and the gaps between its sends). A flood (`FLOOD_MESSAGES`) is
    the implementation's doing: the harness fell behind it, and its verdict stands."""
    if (result.verdict != "fail" or result.clause == ROBUSTNESS or result.harness_late_ms < HARNESS_LATE_MS
            or result.received > FLOOD_MESSAGES):
        return result
    return replace(result, verdict="error", clause="", reason=(
        f"{HARNESS_LATE}: its own timers fired up to {result.harness_late_ms:.0f} ms late (an overloaded machine?), "
        f"so the case's waits and sends were not what it scripts; what failed meanwhile: {result.reason} "
        f"[{result.clause}]"))


def case_budget_ns(case: Case) -> int:
    return sum(s.within_ns for s in case.steps if s.kind in TIMED_KINDS) + 2_000_000_000


# ---- one case on a runtime -------------------------------------------------------------------


class _CaseRun:
    """One case on a runtime (the simulator or the live one, through `harness.runtime`): the
    conductor plays the peers, the IUT is a node of the runtime or a process attached to it,
    ``restart_iut``/``kill_iut`` steps act through the runtime's faults. A crash of the IUT (a
    node that raised; a process that exited by itself, unless its role runs to completion and
    it exited 0) is handed to the conductor, which ends the case with a robustness failure. An
    IUT that is a node of the runtime has its deliveries turned into the lines its protocol's
    ``output`` prints standalone, for the conductor's ``expect_output`` steps (a process's own
    standard output reaches the conductor through `_OutputFeed`)."""

    def __init__(self, runtime: Runtime, protocol: str, completes: bool = False) -> None:
        self.runtime = runtime
        self.output = package(protocol).output
        self.completes = completes  # the IUT's role may exit 0 once its work is done
        self.result: dict[str, Any] = {}
        self.process: Any = None  # the IUT's ExternalNode, live with --cmd
        self.crash_reported = False
        self.exited_ok = False  # a role that runs to completion exited 0
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
        if failure.node == IUT:
            self._crashed(f"the implementation crashed: {failure.error}")
        elif failure.node == CONDUCTOR and not self.result:  # a bug of the harness: no verdict on the IUT
            self.result.update(verdict="error", reason=f"the harness failed: {failure.error}", clause="")

    def _crashed(self, reason: str) -> None:
        if not self.crash_reported and not self.result:
            self.crash_reported = True
            self.runtime.command(self.runtime.now_ns, CONDUCTOR, {"op": IUT_CRASHED, "reason": reason})

    def watch_process(self) -> None:
        """Live: has the IUT's process ended by itself? (checked between steps of the run)"""
        from harness.live.external import describe_exit

        ext = self.process
        if ext is None or self.crash_reported or self.exited_ok:
            return
        if ext.restart_errors:
            self._crashed(f"the implementation did not come back after a restart: {ext.restart_errors[0]}")
        elif ext.exited_by_itself:
            code = ext.process.returncode
            if code == 0 and self.completes:
                self.exited_ok = True  # its work is done: expectations of silence hold from now on
                return
            why = "" if code != 0 else f" (a {self.runtime.role_of(IUT)} does not run to completion)"
            self._crashed(f"the implementation exited with {describe_exit(code)} during the case{why}")

    @property
    def done(self) -> bool:
        if self.process is not None:
            self.watch_process()
        return bool(self.result)


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
    run = _CaseRun(sim, case.protocol, rs.completes)
    sim.add_node(IUT, factory, role=case.role, config=rs.iut_config(endpoint, values))
    sim.add_node(CONDUCTOR, Conductor, role="conductor", config=conductor, start_at_ns=1_000_000)
    # Mesh nodes keep talking after the verdict: stop at it (checked between 50 ms steps).
    run_until(sim, budget, lambda: run.done)
    return _finish(case, run.result or None, f"(simulation) case {case.id}")


# ---- real sockets ---------------------------------------------------------------------------


def run_case_live(case: Case, **kw: Any) -> CaseResult:
    """Run one case against a real implementation (see _run_case_live). Ports come from the OS
    and are released before use, so another process can take one in between: a case whose
    sockets hit "address already in use" is run again on fresh ports (a few times at most). A case
    the harness's own lateness left unjudged (`judged_despite_lateness`) is run again too, twice at
    most: the third such try is reported as it is, an error."""
    from harness.live.sockets import SocketSetupError

    in_use = late = 0
    while True:
        try:
            result = _run_case_live(case, **kw)
        except SocketSetupError as e:
            if "in use" not in str(e) or in_use == 3:
                raise
            in_use += 1
            continue
        if result.verdict == "error" and "in use" in result.reason and in_use < 3 and not kw.get("endpoint"):
            in_use += 1
            continue
        if result.verdict == "error" and result.reason.startswith(HARNESS_LATE) and late < LATE_RERUNS \
                and not kw.get("endpoint"):  # (an implementation already up keeps what the first try did)
            late += 1
            continue
        return result


def _run_case_live(case: Case, *, cmd: str | None = None, endpoint: str | None = None, dialect: str = "strict",
                   trace_dir: str | None = None, tag: str = "", rerun_base: str = "",
                   start_timeout: float = START_TIMEOUT_S) -> CaseResult:
    """Run one case against a real implementation: ``cmd`` is started fresh for this case (with
    its placeholders filled) and always reaped; or ``endpoint`` is an implementation already up.
    ``start_timeout``: how long the implementation may take to start (to bind its ports, or to
    connect to the harness's); no step's wait counts from before it is up."""
    from harness.live.external import ExternalNode
    from harness.live.runtime import LiveRuntime
    from harness.live.supervisor import (
        ManagedProcess, PlaceholderError, ReadyDelay, ReadyPort, SupervisorError, free_port,
    )

    skipped = _skip(case, dialect)
    if skipped:
        return skipped
    rs = suite(case.protocol, case.role)
    ep = endpoint or f"tcp://127.0.0.1:{free_port(count=rs.ports)}"
    values = _values(case, rs, dialect, ep, _live_endpoint)
    rerun = f"{rerun_base} --case {case.id}" if rerun_base else ""
    missing = unnamed_needs(case, cmd)
    if missing:
        return CaseResult(case, "skipped", f"not applicable: the command line does not name {missing}, which "
                          "this case needs (a feature the document makes optional; name it to have the case run)",
                          rerun=rerun)
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
    # {tmpdir}: an empty directory of this case's own, for the IUT's files (state that must
    # survive restart_iut); removed with everything in it when the case ends.
    tmp = tempfile.TemporaryDirectory(prefix=f"zmq-harness-{case.id}-")
    values["tmpdir"] = values["data_dir"] = tmp.name  # {data_dir}: the name chaos command lines use
    iut: ExternalNode | None = None
    trace = None
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
        trace = TraceWriter(os.path.join(trace_dir, f"{case.id}.parquet"),
                            RunInfo(unique_run_id(f"conform/{case.protocol}/{case.role}/{case.id}"), 0, case.id,
                                    case.protocol))
    runtime = LiveRuntime(trace)
    run = _CaseRun(runtime, case.protocol, rs.completes)
    feed = _OutputFeed()
    if trace is not None and not cmd:
        trace.register_node(IUT, case.role, "external")
    try:
        # The IUT binds {endpoint}: it must be ready before the conductor starts. Otherwise the
        # harness binds first and the IUT connects (or binds ports of its own, which it
        # announces) once it is up.
        own_ports = bool(cmd) and rs.iut_binds and binds_own_ports(rs, cmd)
        binds_given = bool(cmd) and rs.iut_binds and not own_ports
        if cmd:
            # Ready once every port of the IUT accepts connections (it may bind them one by one).
            ready = (ReadyPort(int(values["port"]), timeout=start_timeout, count=rs.ports) if binds_given
                     else ReadyDelay(0.0))
            iut = ExternalNode(ManagedProcess(cmd, values=values, ready=ready, name=f"iut-{case.id}",
                                              on_line=feed.line), case.role)
            runtime.attach_process(IUT, iut)
            run.process = iut
            if binds_given:
                iut.process.start()
        plan_values = {**values, "endpoint": None, "port": None} if own_ports else values
        conductor, budget = _conductor_config(case, rs, dialect, ep, tag, plan_values, _live_endpoint)
        connects = iut is not None and not binds_given
        conductor["hold_start"] = connects
        conductor["watch_lateness_ns"] = LATENESS_TICK_NS
        runtime.add_node(CONDUCTOR, Conductor, role="conductor", config=conductor)
        feed.attach(runtime)
        runtime.start()
        if connects:
            iut.process.start()
            _wait_connected(runtime, run, iut, start_timeout)
        run_until(runtime, runtime.now_ns + budget + 5_000_000_000, lambda: run.done)
        result = _finish(case, run.result or None, rerun)
        # How it ended, before the harness stops it: (None: still running) or its exit code.
        exit_code = iut.process.returncode if iut is not None and iut.exited_by_itself else None
    except (SupervisorError, PlaceholderError) as e:
        return CaseResult(case, "error", f"{NOT_STARTED}: {e}", "", rerun=rerun)
    finally:
        with shielded():  # a stop signal waits until the IUT is reaped and the trace written
            try:
                runtime.stop()
            finally:
                if iut is not None:
                    iut.process.stop()
                if trace is not None:
                    trace.close()
                tmp.cleanup()
    return judged_despite_lateness(result if iut is None else _with_process(result, iut, exit_code, rs.completes))


def unnamed_needs(case: Case, cmd: str | None) -> str:
    """The placeholders of the case's ``needs:`` that the command line does not name (all of
    them without a command line), as "{a}, {b}"; "" when the case applies."""
    return ", ".join("{" + n + "}" for n in case.needs if cmd is None or "{" + n + "}" not in cmd)


def _wait_connected(runtime: Any, run: _CaseRun, iut: Any, timeout: float) -> None:
    """Until the IUT's processes hold a TCP connection to a port the harness bound (or it
    talks, exits, or ``timeout`` s pass), then the conductor's script begins: an implementation
    that connects lazily, or never, is judged by the case from then on, as before."""
    from harness.live.procnet import connects_to

    ports = {int(ep.rsplit(":", 1)[1]) for eps in runtime.endpoints(CONDUCTOR).values() for ep in eps
             if ep.startswith("tcp://") and ep.rsplit(":", 1)[1].isdigit()}
    deadline = time.monotonic() + timeout
    pid = iut.process.pid
    while (time.monotonic() < deadline and pid is not None and not run.done and iut.process.running
           and not connects_to(pid, ports)):
        time.sleep(0.02)
    runtime.command(0, CONDUCTOR, {"op": IUT_CONNECTED})


def check_command(rs: RoleSuite, cmd: str) -> None:
    """Raise PlaceholderError (a ValueError) for a command line that cannot run any case: an
    unknown placeholder, a stray brace, an unbalanced quote."""
    from harness.live.supervisor import fill_placeholders

    standard = ("endpoint", "port", "host", "dialect", "python", "zmq_harness", "tmpdir", "data_dir", *rs.harness_endpoints,
                *rs.iut_endpoints)
    fill_placeholders(cmd, {**rs.placeholders, **dict.fromkeys(standard, "x")})


def binds_own_ports(rs: RoleSuite, cmd: str) -> bool:
    """A command line that names neither {endpoint} nor {port}, of a role that announces the
    endpoints it binds: the implementation picks its own ports, and is followed there."""
    return rs.announces_endpoint and not re.search(r"(?<!\{)\{(endpoint|port)\}", cmd)


def _with_process(result: CaseResult, iut: Any, exit_code: int | None, completes: bool) -> CaseResult:
    """The verdict with what the IUT's process did (``exit_code``: how it ended by itself, None
    if it did not): an exit after the last step is a crash too (unless its role runs to
    completion and it exited 0); a failed case carries the process's last output (read once it
    is reaped, so its dying words are in)."""
    from harness.live.external import describe_exit

    exited = exit_code is not None
    crashed = exited and not (exit_code == 0 and completes)
    if result.verdict == "pass" and crashed:
        result = CaseResult(result.case, "fail", f"the implementation exited with {describe_exit(exit_code)} at the "
                            "end of the case", ROBUSTNESS, result.exchange, rerun=result.rerun)
    elif result.verdict == "fail" and crashed and result.clause != ROBUSTNESS:
        # it died while the step it failed was waiting (seen only once the step had timed out):
        # the crash is the verdict, as when it is seen first; the step's failure stays in the reason
        result = CaseResult(result.case, "fail", f"the implementation exited with {describe_exit(exit_code)} during "
                            f"the case; before that was seen: {result.reason} [{result.clause}]", ROBUSTNESS,
                            result.exchange, result.step, result.step_line, result.elapsed_ms, result.rerun)
    if result.verdict != "pass":
        if exited and "exited" not in result.reason:
            result.reason += f" (the implementation exited with {describe_exit(exit_code)})"
        result.iut_output = iut.process.tail(20)
    return result


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


class SuiteAborted(RuntimeError):
    """The implementation failed to start for several cases in a row: the rest would too."""


def run_suite(cases: list[Case], *, on_result: Callable[[CaseResult], None] | None = None,
              **kw: Any) -> list[CaseResult]:
    """Live runs of every case, each against a fresh instance when a command is given.
    ``on_result`` sees each result as soon as its case ends. After `START_FAILURES_TO_GIVE_UP`
    cases in a row whose implementation did not start, `SuiteAborted` (the results so far
    went to ``on_result``)."""
    out = []
    in_a_row = 0
    for i, case in enumerate(cases):
        result = run_case_live(case, tag=f"-{i}" if kw.get("endpoint") else "", **kw)
        out.append(result)
        if on_result is not None:
            on_result(result)
        in_a_row = in_a_row + 1 if result.verdict == "error" and result.reason.startswith(NOT_STARTED) else 0
        if in_a_row >= START_FAILURES_TO_GIVE_UP and i + 1 < len(cases):
            raise SuiteAborted(f"the implementation did not start for {in_a_row} cases in a row; the other "
                               f"{len(cases) - i - 1} case(s) were not run. Its last error: "
                               f"{result.reason[len(NOT_STARTED) + 2:]}")
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
