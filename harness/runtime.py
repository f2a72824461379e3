"""The runtime interface: what the run driver, the nemesis and the conformance runner ask of a
runtime. The simulator (`harness.sim.Simulation`) and the live runtime
(`harness.live.runtime.LiveRuntime`) both implement it, so a scenario, a conformance case and
a fault schedule are written once and run on either.

Ground floor: this module imports nothing of the project but the node contract.

Times are integer nanoseconds since the run began: virtual time in simulation, wall time
since ``start`` live. ``run(until_ns)`` lets the runtime work until that time (in simulation it
processes every event due before it; live it waits that long in wall time while its loop
thread serves the nodes); callbacks given to ``schedule`` run on the runtime's own thread at
their time, so the nemesis and the workload touch nodes from one place in both runtimes.

One policy for a node that raises (in a handler, in ``get_timer``, or by returning something
that is not a valid action): the runtime records a ``NodeFailure``, writes an ``error`` trace
row that says where and why, crashes the node (a ``crash`` row), calls the ``on_failure``
hooks, and goes on with the others. Restarting it is the nemesis's or the caller's business.
The harness's own bugs (a hook that raises in simulation) are not node failures: they abort.

Seeds: a node's random generator is ``node_rng(seed, name, incarnation)`` in both runtimes,
the incarnation counting from 0 at the first start.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from harness.node import Action, NodeFactory

# Fault kinds a runtime may or may not be able to carry out (``Runtime.capabilities``).
CRASH, RESTART, PAUSE, PARTITION, CLOCK, SLOW_LINK, RULES = (
    "crash", "restart", "pause", "partition", "clock_skew", "slow_link", "rules",
)

ActionHook = Callable[[str, Action, int], None]  # (node, action, time_ns)
# (node, time_ns, late_ns): the live runtime fired an in-process node's timer ``late_ns`` after it was due,
# its loop busy with other nodes; the node was held up by the harness, not slow by itself
StallHook = Callable[[str, int, int], None]


def skewed_time(t: int, offset: int, drift: float) -> int:
    """What a node's clock reads at the runtime's time ``t`` after a clock fault: ``t + offset +
    drift * t`` (both runtimes; `NodeClock.runtime_time` inverts it)."""
    return t + offset + int(round(drift * t))


class NodeClock:
    """The clock of one node slot, which a clock fault may skew (both runtimes' slots mix it in;
    they keep ``offset``, ``drift`` and ``skewed``): the node reads `node_time` of the runtime's
    time, and a deadline it asks for on its own clock is due at `runtime_time` of it."""

    __slots__ = ()
    offset: int
    drift: float
    skewed: bool

    def set_skew(self, offset: int, drift: float) -> None:
        self.offset, self.drift = offset, drift
        self.skewed = offset != 0 or drift != 0.0

    def node_time(self, t: int) -> int:
        return skewed_time(t, self.offset, self.drift) if self.skewed else t

    def runtime_time(self, node_time: int) -> int:
        """The earliest runtime time at which the node's clock reads ``node_time`` or later."""
        if not self.skewed:
            return node_time
        offset, drift = self.offset, self.drift
        if drift == 0.0:
            return node_time - offset
        t = math.ceil((node_time - offset) / (1.0 + drift))
        while skewed_time(t, offset, drift) < node_time:
            t += 1
        while skewed_time(t - 1, offset, drift) >= node_time:
            t -= 1
        return t


def node_rng(seed: int, name: str, incarnation: int) -> random.Random:
    """The random generator a node gets in one incarnation (0 = its first start)."""
    return random.Random(f"{seed}/{name}/{incarnation}")


@dataclass(frozen=True)
class NodeFailure:
    """A node raised or misbehaved; the runtime crashed it. ``where`` is the handler
    (``receive``, ``handle_timer``, ``command``, ``start``, ``get_timer``, ``action``)."""

    node: str
    incarnation: int
    time_ns: int
    where: str
    error: str  # "TypeError: ..." in one line
    detail: str = ""  # the innermost frames of the traceback, for the trace and the verdict

    def describe(self) -> str:
        return f"{self.node} (incarnation {self.incarnation}) failed in {self.where} at t={self.time_ns} ns: {self.error}"


FailureHook = Callable[[NodeFailure], None]


class UnsupportedFault(RuntimeError):
    """A fault this runtime cannot carry out (clock skew over real sockets, say)."""


class Runtime(Protocol):
    """Implemented by `harness.sim.Simulation` and `harness.live.runtime.LiveRuntime`."""

    seed: int
    capabilities: frozenset[str]  # which fault kinds above it can carry out

    @property
    def now_ns(self) -> int: ...

    # ---- nodes ------------------------------------------------------------------------------
    def add_node(self, name: str, factory: NodeFactory, *, role: str, config: dict[str, Any] | None = None,
                 implementation: str = "reference", start_at_ns: int = 0) -> None: ...

    def node_names(self) -> list[str]: ...

    def role_of(self, name: str) -> str: ...

    def is_running(self, name: str) -> bool:
        """Started and not crashed (a paused node is running)."""
        ...

    def last_note(self, name: str, kind: str) -> dict[str, Any] | None:
        """The data of the node's latest ``Note`` of this kind in its current incarnation."""
        ...

    @property
    def failures(self) -> list[NodeFailure]: ...

    def on_action(self, hook: ActionHook) -> None: ...

    def on_failure(self, hook: FailureHook) -> None: ...

    # ---- time -------------------------------------------------------------------------------
    def command(self, at_ns: int, node: str, request: dict[str, Any]) -> None: ...

    def command_stream(self, stream: Iterator[tuple[int, str, dict[str, Any]]]) -> None:
        """Commands of a time-ordered stream, each drawn when the previous one is due."""
        ...

    def schedule(self, at_ns: int, fn: Callable[[], object]) -> None: ...

    def run(self, until_ns: int) -> None: ...

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` where the nodes run (the loop thread live) and return its result."""
        ...

    # ---- faults -----------------------------------------------------------------------------
    def crash(self, node: str) -> None: ...

    def restart(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False) -> int: ...

    def heal(self, pid: int | None = None) -> None: ...

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None: ...

    def slow_link(self, src: str, dst: str, latency: Any) -> int: ...

    def restore_link(self, lid: int) -> None: ...

    def fault_note(self, fault: str, detail: str, node: str | None = None) -> None:
        """A trace row about a fault that did not act on a message (a skipped one, say)."""
        ...


def run_until(runtime: Runtime, end_ns: int, done: Callable[[], bool] | None = None,
              step_ns: int = 50_000_000) -> None:
    """Run to ``end_ns``, or, with ``done``, in steps until ``done()`` holds (checked between
    steps, so the runtime's hot loop carries no predicate)."""
    if done is None:
        runtime.run(end_ns)
        return
    t = runtime.now_ns
    while not done() and t < end_ns:
        t = min(end_ns, t + step_ns)
        runtime.run(t)




DETAIL_MAX = 4000  # a traceback in a trace row is evidence for a human, not a dump


def exception_summary(exc: BaseException) -> str:
    """The exception and the innermost frames of its traceback, short enough for a row."""
    import traceback

    text = "".join(traceback.format_exception(exc, limit=-6)).strip()
    if len(text) > DETAIL_MAX:
        text = "..." + text[-(DETAIL_MAX - 3):]
    return text


def failure_of(node: str, incarnation: int, time_ns: int, where: str, exc: BaseException) -> NodeFailure:
    return NodeFailure(node, incarnation, time_ns, where, f"{type(exc).__name__}: {exc}", exception_summary(exc))


__all__ = [
    "CLOCK", "CRASH", "PARTITION", "PAUSE", "RESTART", "RULES", "SLOW_LINK", "ActionHook", "FailureHook", "StallHook",
    "NodeClock", "NodeFailure", "Runtime", "UnsupportedFault", "exception_summary", "failure_of", "node_rng", "run_until",
]
