"""Run one node in the foreground as a process of its own (backs `zmq-harness node ...`).

Once its sockets are bound the process prints ``READY <name> <endpoint>...`` on stdout, so a
supervisor can wait for it and read the resolved endpoints. SIGTERM or SIGINT shut it down
cleanly with exit code 0; a node that raises makes the process exit with code 1 after
printing the error to stderr (a dead node in a live process would only hide the failure).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable

from harness.live.runtime import LiveRuntime
from harness.node import Action, Deliver, NodeFactory
from harness.trace import RunInfo, TraceWriter

EXIT_OK = 0
EXIT_NODE_FAILED = 1


def run_standalone(
    factory: NodeFactory,
    *,
    name: str,
    role: str,
    config: dict[str, Any] | None = None,
    ready_line: bool = True,
    trace_path: str | None = None,
    seed: int = 0,
    implementation: str = "reference",
    output: Callable[[str, dict[str, Any]], str | None] | None = None,
) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code. ``output`` turns the node's
    deliveries to its application into lines printed on standard output (the protocol
    package's ``output``; conformance cases read them)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    runtime = LiveRuntime(seed=seed)
    trace: TraceWriter | None = None
    code = EXIT_OK
    try:
        node = runtime.add_node(name, factory, role=role, config=config, implementation=implementation)
        if trace_path is not None:
            run_id = time.strftime("live-%Y%m%dT%H%M%S")
            trace = TraceWriter(trace_path, RunInfo(run_id, seed, "", getattr(node, "protocol", "")))
            runtime.set_trace(trace)
        if output is not None:
            runtime.on_action(lambda node, action, t: _print_delivery(output, action))
        runtime.on_failure(lambda failure: stop.set())  # exit at once: a supervisor watches for it
        runtime.start()
        if ready_line:
            endpoints = [ep for eps in runtime.endpoints(name).values() for ep in eps]
            print(" ".join(["READY", name, *endpoints]), flush=True)
        # Short waits (signals and a node's failure only set the event).
        while not stop.wait(0.2):
            pass
        if runtime.failures:
            for failure in runtime.failures:
                print(f"node {failure.node!r} failed in {failure.where}:\n{failure.detail}",
                      file=sys.stderr, flush=True)
            code = EXIT_NODE_FAILED
    finally:
        try:
            runtime.stop()
        finally:
            if trace is not None:
                trace.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return code


def _print_delivery(output: Callable[[str, dict[str, Any]], str | None], action: Action) -> None:
    if isinstance(action, Deliver):
        line = output(action.kind, action.data)
        if line is not None:
            print(line, flush=True)
