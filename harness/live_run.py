"""Run a scenario over real sockets on loopback: `run_live(scenario, seed, out_dir)`.

Reference nodes run in one `LiveRuntime` (real pyzmq sockets, wall-clock timers); groups with
a ``command`` are external implementations started by the supervisor with their endpoints
filled into the command line (``{endpoint}``, ``{port}``, ``{host}``, ``{advertise}``,
``{datadir}``), waited for, and always reaped. The workload is played at wall-clock times and
the scenario's fault schedule goes through the nemesis, as in simulation, onto a live target
(`harness.live_faults.LiveNemesis`): crashes, restarts and pauses act on in-process nodes or on
processes, message rules, partitions and slow links on the ZMTP proxy placed in front of the
endpoints the faults concern. Clock skew is refused: a real process reads the host's clock.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from fault_injection import nemesis
from fault_injection.netfaults import NEMESIS, FaultEvent
from fault_injection.process import ProcessFaults
from harness.checkers.base import Observer, Verdict
from harness.composition import HARNESS, RunResult, _slug, build_checkers, node_configs, workload_schedule
from harness.live.runtime import LiveRuntime
from harness.live.supervisor import ManagedProcess, ReadyDelay, ReadyLine, ReadyPort, free_port
from harness.live_faults import (
    LiveNemesis, ProxyPlacement, connection_owner, emit_rows, needs_proxy, place_proxy, refusal,
)
from harness.probe import probed
from harness.protocols import codec
from harness.registry import package
from harness.run_ids import unique_run_id
from harness.scenario import Scenario
from harness.trace import VERDICT, RunInfo, TraceWriter

TICK_S = 0.05  # the run loop wakes at least this often (fault rows are written then)


class LiveRunError(RuntimeError):
    pass


def _check_supported(scenario: Scenario) -> None:
    reason = refusal(scenario)
    if reason is not None:
        raise LiveRunError(reason)


def _ready(spec: dict[str, Any] | None, port: int | None) -> Any:
    spec = spec or {}
    timeout = float(spec.get("timeout", 10))
    if "line" in spec:
        return ReadyLine(str(spec["line"]), timeout=timeout)
    if "delay" in spec:
        return ReadyDelay(float(str(spec["delay"]).rstrip("s")))
    if port is not None:
        return ReadyPort(int(spec.get("port", port)), timeout=timeout)
    return ReadyDelay(0.5)


def run_live(scenario: Scenario, seed: int, out_dir: str, *, wall_timeout_s: float | None = None) -> RunResult:
    _check_supported(scenario)
    pkg = package(scenario.protocol)
    run_id = unique_run_id(f"{scenario.name}/live-{seed}")
    run_dir = os.path.join(out_dir, _slug(scenario.name))
    tpath = os.path.join(run_dir, f"live-seed-{seed}.parquet")
    trace = TraceWriter(tpath, RunInfo(run_id, seed, scenario.name, scenario.protocol))
    trace.register_node(HARNESS, HARNESS, "")
    trace.register_node(NEMESIS, NEMESIS, "")
    endpoints: dict[str, str] = {}

    def endpoint(node: str, purpose: str) -> str:
        key = f"{node}/{purpose}"
        if key not in endpoints:
            endpoints[key] = f"tcp://127.0.0.1:{free_port()}"
        return endpoints[key]

    configs = node_configs(scenario, endpoint)
    roles = {n: r for n, (r, _) in configs.items()}
    observer = Observer(build_checkers(scenario), codec(scenario.protocol, scenario.dialect), roles)
    runtime = LiveRuntime(trace, seed=seed)
    clock = runtime.now
    external = [n for n in configs if scenario.group_of(n).command]
    placement: ProxyPlacement | None = None
    processes: dict[str, ManagedProcess] = {}
    pending: list[FaultEvent] = []  # rows of process faults, written on the runtime's thread
    verdicts: list[Verdict] = []
    try:
        if needs_proxy(scenario):
            owners = {ep: key.split("/", 1)[0] for key, ep in endpoints.items()}
            placement = place_proxy(
                scenario, pkg, configs, owners, [n for n in configs if n not in external], seed, clock,
                name_socket=lambda node, ep: _socket_on(runtime, node, ep),
                welcome_of=lambda node, ep: _welcome_on(runtime, node, ep),
                identify=lambda addr: connection_owner(addr, {n: p.pid for n, p in processes.items()}))
        faults = ProcessFaults(runtime, processes, clock, pending.append)
        target = LiveNemesis(faults, placement.proxy if placement else None, observer, runtime.call, clock)
        for name, (role, cfg) in configs.items():
            group = scenario.group_of(name)
            if group.command:
                processes[name] = _process(scenario, name, group, cfg, endpoints, placement, seed, run_dir)
                trace.register_node(name, role, group.implementation)
            else:
                factory = probed(pkg.roles[role].factory, observer, clock)
                source = placement.sources.get(name) if placement else None

                def start(name: str = name, role: str = role, cfg: dict[str, Any] = cfg, factory: Any = factory,
                          impl: str = group.implementation, source: str | None = source) -> None:
                    runtime.add_node(name, factory, role=role, config=cfg, implementation=impl, source=source)

                if group.start_ns:
                    target.schedule(group.start_ns, start)
                else:
                    start()
        if placement is not None:
            placement.proxy.start()
        for proc in processes.values():
            proc.start()
        runtime.start()
        t0 = time.monotonic()
        for at, node, request in workload_schedule(scenario, seed):
            if node in processes:
                raise LiveRunError(f"workload node {node} is external; the harness can only drive reference nodes")
            target.schedule(at, lambda node=node, request=request: runtime.command(node, request))
        nemesis.install(scenario.faults, target)

        def write_fault_rows() -> None:
            events = pending[:]
            del pending[:len(events)]
            if placement is not None:
                events += placement.proxy.drain_events()
            if events:
                runtime.call(lambda: emit_rows(trace, events))

        deadline = t0 + (wall_timeout_s or scenario.duration_ns / 1e9 + 30)
        end = t0 + (scenario.duration_ns + scenario.settle_ns) / 1e9
        status_at = end - 0.3  # checkers that judge final state ask for it just before the end
        asked = False
        while True:
            now = time.monotonic()
            if now > deadline:
                raise LiveRunError("the live run overran its time limit")
            at = target.next_at()
            if at is not None and t0 + at / 1e9 <= now:
                target.pop()()
                continue
            if now >= end and at is None:
                break
            if not asked and now >= status_at:
                asked = True
                started = runtime.node_names()
                for name in configs:
                    if roles[name] in pkg.final_status and name in started and not runtime.is_crashed(name):
                        runtime.command(name, {"op": "status"})
            write_fault_rows()
            wake = min(end if at is None else t0 + at / 1e9, end if asked else status_at)
            time.sleep(max(0.0, min(wake - time.monotonic(), TICK_S)))
        verdicts = runtime.call(lambda: observer.finish(clock()), timeout=30)
        for p in processes.values():
            if not p.running:
                verdicts.append(Verdict("process-alive", "", False,
                                        f"{p.name} exited with status {p.returncode}: {p.tail(5)}"))
        write_fault_rows()
        stats: dict[str, Any] = {"observed": observer.count, "wall_s": round(time.monotonic() - t0, 3),
                                 "endpoints": endpoints, "node_errors": [str(e) for e in runtime.errors]}
        if placement is not None:
            stats["proxy"] = _proxy_stats(placement)
        now_ns = clock()
        for v in verdicts:
            trace.emit(HARNESS, VERDICT, now_ns, verdict="pass" if v.ok else "fail", clause=v.clause or v.check,
                       msg_type=v.check, detail=v.detail)
    finally:
        # Always: stop the loop and the proxy, reap every process, and flush the trace (also on abort).
        try:
            runtime.stop()
        finally:
            for p in processes.values():
                p.stop()
            if placement is not None:
                placement.proxy.stop()
                emit_rows(trace, pending + placement.proxy.drain_events())
            trace.close()
    result = RunResult(scenario.name, seed, "live", verdicts, stats, tpath)
    result.result_path = os.path.join(run_dir, f"live-seed-{seed}.json")
    with open(result.result_path, "w") as f:
        json.dump(result.to_dict(), f, indent=2, default=str)
    return result


def _process(scenario: Scenario, name: str, group: Any, cfg: dict[str, Any], endpoints: dict[str, str],
             placement: ProxyPlacement | None, seed: int, run_dir: str) -> ManagedProcess:
    """An external implementation, with its placeholders filled: its own endpoints, the one it
    announces (the proxy's when proxied), a data directory that outlives restarts, and every
    text setting the protocol's wiring gave the node (``{connect}``, ``{towers}``: the proxy's
    listeners where it stands between the node and its peers)."""
    bind = [e for k, e in endpoints.items() if k.startswith(name + "/")]
    ep = bind[0] if bind else ""
    port = int(ep.rsplit(":", 1)[1]) if ep else None
    datadir = os.path.join(run_dir, "data", name)
    os.makedirs(datadir, exist_ok=True)
    advertise = placement.advertised.get(ep, ep) if placement else ep
    values = {**_config_values(cfg), "endpoint": ep, "port": port or "", "host": "127.0.0.1", "name": name,
              "seed": seed, "advertise": advertise, "datadir": datadir,
              **{f"endpoint{i}": e for i, e in enumerate(bind)}}
    return ManagedProcess(group.command, values=values, ready=_ready(group.ready, port), name=name,
                          log_path=os.path.join(run_dir, f"{name}.log"))


def _config_values(cfg: dict[str, Any]) -> dict[str, str]:
    """Text settings as command-line values: a list joined with ``,``, a list of lists with
    ``;`` between them (``--set towers=xsub,xpub;xsub2,xpub2``)."""
    out = {}
    for key, value in cfg.items():
        if not key.isidentifier():
            continue
        if isinstance(value, str):
            out[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            out[key] = ",".join(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (list, tuple)) for v in value):
            out[key] = ";".join(",".join(map(str, v)) for v in value)
    return out


def _socket_on(runtime: LiveRuntime, node: str, endpoint: str) -> str:
    """The name of the node's socket that binds or connects to ``endpoint`` ("" if unknown)."""
    for sockets in (runtime.endpoints(node), runtime.connected(node)):
        for name, eps in sockets.items():
            if endpoint in eps:
                return name
    return ""


def _welcome_on(runtime: LiveRuntime, node: str, endpoint: str) -> bytes | None:
    """The welcome message of the node's XPUB bound at ``endpoint`` (the simulator names it
    zmq.welcome), or None."""
    current = runtime.node(node)
    for spec in current.sockets() if current is not None else ():
        if endpoint in spec.bind:
            return spec.welcome
    return None


def _proxy_stats(placement: ProxyPlacement) -> dict[str, Any]:
    s = placement.proxy.stats()
    return {"links": placement.links, "connections": s.connections, "messages": s.messages,
            "by_type": dict(s.by_type), "effects": dict(s.effects), "opaque": dict(s.opaque),
            "unidentified": s.unidentified, "refused": s.refused, "resets": s.resets}

