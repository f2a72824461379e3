"""Run a scenario over real sockets on loopback: `run_live(scenario, seed, out_dir)`.

Reference nodes run in one `LiveRuntime` (real pyzmq sockets, wall-clock timers); groups with
a ``command`` are external implementations started by the supervisor with their endpoints
filled into the command line (``{endpoint}``, ``{port}``, ``{host}``), waited for, and always
reaped. The workload is played at wall-clock times; crashes, restarts and pauses act on the
in-process nodes or on the processes. Message rules and partitions over real sockets need the
ZMTP proxy and are refused with a clear error until it exists.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from fault_injection import nemesis
from harness.checkers.base import CRASH, RESTART, Observer
from harness.composition import HARNESS, RunResult, _slug, build_checkers, node_configs, workload_schedule
from harness.live.runtime import LiveRuntime
from harness.live.supervisor import ManagedProcess, ReadyDelay, ReadyLine, ReadyPort, free_port
from harness.probe import probed
from harness.protocols import codec
from harness.registry import package
from harness.run_ids import unique_run_id
from harness.scenario import Scenario
from harness.trace import VERDICT, RunInfo, TraceWriter

LIVE_FAULTS = (nemesis.Crash, nemesis.Pause)


class LiveRunError(RuntimeError):
    pass


def _check_supported(scenario: Scenario) -> None:
    if len(scenario.rules):
        raise LiveRunError("message rules (drop/delay/duplicate/reorder) are not available over real sockets yet "
                           "(they need the ZMTP proxy); run this scenario in simulation")
    for f in scenario.faults:
        if not isinstance(f, LIVE_FAULTS):
            raise LiveRunError(f"{type(f).__name__} faults are not available over real sockets yet; "
                               "run this scenario in simulation")


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


def capture_path(out_dir: str, scenario: Scenario, seed: int) -> str:
    """Where ``--capture`` without a path saves the run's traffic: beside its trace."""
    return os.path.join(out_dir, _slug(scenario.name), f"live-seed-{seed}.pcap")


def run_live(scenario: Scenario, seed: int, out_dir: str, *, wall_timeout_s: float | None = None,
             capture: str | None = None) -> RunResult:
    """``capture``: record the run's loopback traffic into this pcap file (harness.capture.sniff)."""
    _check_supported(scenario)
    pkg = package(scenario.protocol)
    run_id = unique_run_id(f"{scenario.name}/live-{seed}")
    tpath = os.path.join(out_dir, _slug(scenario.name), f"live-seed-{seed}.parquet")
    trace = TraceWriter(tpath, RunInfo(run_id, seed, scenario.name, scenario.protocol))
    trace.register_node(HARNESS, HARNESS, "")
    endpoints: dict[str, str] = {}

    def endpoint(node: str, purpose: str) -> str:
        key = f"{node}/{purpose}"
        if key not in endpoints:
            endpoints[key] = f"tcp://127.0.0.1:{free_port()}"
        return endpoints[key]

    configs = node_configs(scenario, endpoint)
    recorder = None
    if capture:  # started before any node, on every port the run binds (peers connect to those)
        from harness.capture.sniff import LiveCapture

        recorder = LiveCapture(capture, [int(e.rsplit(":", 1)[1]) for e in endpoints.values()]).start()
    roles = {n: r for n, (r, _) in configs.items()}
    observer = Observer(build_checkers(scenario), codec(scenario.protocol, scenario.dialect), roles)
    runtime = LiveRuntime(trace, seed=seed)
    clock = runtime.now
    processes: dict[str, ManagedProcess] = {}
    late: list[tuple[int, str, str, dict[str, Any], str]] = []  # nodes that join later
    stop = threading.Event()
    try:
        for name, (role, cfg) in configs.items():
            group = scenario.group_of(name)
            if group.command:
                bind = [e for k, e in endpoints.items() if k.startswith(name + "/")]
                ep = bind[0] if bind else ""
                port = int(ep.rsplit(":", 1)[1]) if ep else None
                values = {"endpoint": ep, "port": port or "", "host": "127.0.0.1", "name": name, "seed": seed,
                          **{f"endpoint{i}": e for i, e in enumerate(bind)}}
                proc = ManagedProcess(group.command, values=values, ready=_ready(group.ready, port), name=name,
                                      log_path=os.path.join(out_dir, _slug(scenario.name), f"{name}.log"))
                processes[name] = proc
                trace.register_node(name, role, group.implementation)
            elif group.start_ns:
                late.append((group.start_ns, name, role, cfg, group.implementation))
            else:
                runtime.add_node(name, probed(pkg.roles[role].factory, observer, clock), role=role, config=cfg,
                                 implementation=group.implementation)
        for proc in processes.values():
            proc.start()
        runtime.start()
        t0 = time.monotonic()
        events: list[tuple[int, int, Any]] = []
        for i, (at, node, request) in enumerate(workload_schedule(scenario, seed)):
            if node in processes:
                raise LiveRunError(f"workload node {node} is external; the harness can only drive reference nodes")
            events.append((at, i, ("command", node, request)))
        for start_ns, name, role, cfg, impl in late:
            factory = probed(pkg.roles[role].factory, observer, clock)
            events.append((start_ns, len(events), ("start", name, role, cfg, impl, factory)))
        for f in scenario.faults:
            if isinstance(f, nemesis.Crash):
                events.append((f.at, len(events), ("crash", f.node)))
                if f.restart_after is not None:
                    events.append((f.at + f.restart_after, len(events), ("restart", f.node)))
            elif isinstance(f, nemesis.Pause):
                events.append((f.start, len(events), ("pause", f.node)))
                if f.end is not None:
                    events.append((f.end, len(events), ("resume", f.node)))
        events.sort(key=lambda e: (e[0], e[1]))
        deadline = t0 + (wall_timeout_s or scenario.duration_ns / 1e9 + 30)
        for at, _, ev in events:
            while not stop.is_set():
                left = t0 + at / 1e9 - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, 0.05))
            if time.monotonic() > deadline:
                raise LiveRunError("the live run overran its time limit")
            _apply(ev, runtime, processes, observer)
        end = t0 + (scenario.duration_ns + scenario.settle_ns) / 1e9
        status_at = end - 0.3  # checkers that judge final state ask for it just before the end
        asked = False
        while time.monotonic() < end:
            if not asked and time.monotonic() >= status_at:
                asked = True
                for name in configs:
                    if roles[name] in pkg.final_status and name not in processes and not runtime.is_crashed(name):
                        runtime.command(name, {"op": "status"})
            time.sleep(max(min(end - time.monotonic(), 0.05), 0))
        verdicts = runtime.call(lambda: observer.finish(clock()), timeout=30)
        for p in processes.values():
            if not p.running:
                from harness.checkers.base import Verdict

                verdicts.append(Verdict("process-alive", "", False,
                                        f"{p.name} exited with status {p.returncode}: {p.tail(5)}"))
        stats = {"observed": observer.count, "wall_s": round(time.monotonic() - t0, 3),
                 "endpoints": endpoints, "node_errors": [str(e) for e in runtime.errors]}
        now = clock()
        for v in verdicts:
            trace.emit(HARNESS, VERDICT, now, verdict="pass" if v.ok else "fail", clause=v.clause or v.check,
                       msg_type=v.check, detail=v.detail)
    finally:
        # Always: stop the loop, reap every process, and flush the trace (also on abort).
        stop.set()
        try:
            runtime.stop()
        finally:
            for p in processes.values():
                p.stop()
            if recorder is not None:
                summary = recorder.stop()
            trace.close()
    if recorder is not None:
        stats["capture"] = {"tool": summary.tool, "path": summary.path, "packets": summary.packets,
                            "dropped": summary.dropped}
    result = RunResult(scenario.name, seed, "live", verdicts, stats, tpath)
    result.result_path = os.path.join(out_dir, _slug(scenario.name), f"live-seed-{seed}.json")
    with open(result.result_path, "w") as f:
        json.dump(result.to_dict(), f, indent=2, default=str)
    return result


def _apply(ev: tuple[Any, ...], runtime: LiveRuntime, processes: dict[str, ManagedProcess], observer: Observer) -> None:
    kind = ev[0]
    if kind == "command":
        runtime.command(ev[1], ev[2])
        return
    if kind == "start":
        _, name, role, cfg, impl, factory = ev
        runtime.add_node(name, factory, role=role, config=cfg, implementation=impl)
        return
    node = ev[1]
    proc = processes.get(node)
    if kind == "crash":
        proc.kill() if proc else runtime.crash(node)
        runtime.call(lambda: observer.emit(runtime.now(), node, CRASH))
    elif kind == "restart":
        proc.restart() if proc else runtime.restart(node)
        runtime.call(lambda: observer.emit(runtime.now(), node, RESTART))
    elif kind == "pause":
        if proc is None:
            raise LiveRunError(f"pausing in-process node {node} is not possible; pause works on external processes")
        proc.pause()
    elif kind == "resume" and proc is not None:
        proc.resume()
