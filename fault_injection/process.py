"""Process faults on real runs: kill, crash-and-restart, pause/resume — on external
implementations and on reference nodes run in-process, behind one interface the nemesis uses.

External implementations are `harness.live.supervisor.ManagedProcess` objects (anything with
its ``kill``/``start``/``pause``/``resume``/``running``): a crash is SIGKILL to the process group
and a reap; a restart starts the same command line in the same working directory again (its
``{datadir}`` is the same directory, so what it wrote survives, as a node's durable store does);
a pause is SIGSTOP to the group, resume SIGCONT.

Reference nodes run in-process by `harness.live.runtime.LiveRuntime` (anything with its
``crash``/``restart``/``pause``/``resume``): a crash throws the node object away and keeps its
durable store; a pause stops the runtime from reading the node's sockets, firing its timer and
handing it commands, which is what a stopped process looks like from the outside — its peers'
messages pile up in queues and then in kernel buffers. Pausing in-process rather than moving the
node to a process of its own keeps the checkers' probes on the node and costs nothing to set up;
the price is that the node's own process (the harness) keeps running, which no peer can see.

Rows: the runtime traces what it does to in-process nodes; for external processes this module
reports ``FaultEvent`` rows (crash, restart, pause, resume) like the simulator writes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from fault_injection.netfaults import FaultEvent
from harness.trace import CRASH, PAUSE, RESTART, RESUME


class ExternalProcess(Protocol):
    """What the faults need of a managed process (ManagedProcess has it)."""

    @property
    def running(self) -> bool: ...

    def kill(self) -> int | None: ...

    def start(self) -> Any: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class InProcessNodes(Protocol):
    """What the faults need of the runtime of in-process nodes (LiveRuntime has it)."""

    def crash(self, node: str) -> None: ...

    def restart(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...


class ProcessFaultError(RuntimeError):
    pass


class ProcessFaults:
    """Crash, restart, pause and resume a node by name, wherever it runs."""

    def __init__(self, nodes: InProcessNodes | None, processes: Mapping[str, ExternalProcess],
                 clock: Callable[[], int], on_event: Callable[[FaultEvent], None] | None = None) -> None:
        self.nodes = nodes
        self.processes = processes  # the caller may add processes later
        self.clock = clock
        self.on_event = on_event
        self.paused: set[str] = set()

    def is_external(self, node: str) -> bool:
        return node in self.processes

    def crash(self, node: str) -> None:
        """SIGKILL (external) or throw the node object away (in-process)."""
        proc = self.processes.get(node)
        if proc is None:
            self._in_process().crash(node)
        else:
            code = proc.kill()
            self._row(node, CRASH, "crash", f"SIGKILL, exit status {code}")
        self.paused.discard(node)

    def restart(self, node: str) -> None:
        """Start it again with the same command and data (a running process is killed first)."""
        proc = self.processes.get(node)
        if proc is None:
            self._in_process().restart(node)
        else:
            if proc.running:
                proc.kill()
            proc.start()
            self._row(node, RESTART, "restart", "same command line and data directory")
        self.paused.discard(node)

    def pause(self, node: str) -> None:
        proc = self.processes.get(node)
        if proc is None:
            self._in_process().pause(node)
        else:
            if not proc.running:
                return  # a crashed process cannot be stopped; the simulator ignores it too
            proc.pause()
            self._row(node, PAUSE, "pause", "SIGSTOP")
        self.paused.add(node)

    def resume(self, node: str) -> None:
        if node not in self.paused:
            return
        self.paused.discard(node)
        proc = self.processes.get(node)
        if proc is None:
            self._in_process().resume(node)
        elif proc.running:
            proc.resume()
            self._row(node, RESUME, "resume", "SIGCONT")

    def _in_process(self) -> InProcessNodes:
        if self.nodes is None:
            raise ProcessFaultError("no runtime of in-process nodes was given")
        return self.nodes

    def _row(self, node: str, kind: str, fault: str, detail: str) -> None:
        if self.on_event is not None:
            self.on_event(FaultEvent(self.clock(), node, kind, fault, detail=detail))
