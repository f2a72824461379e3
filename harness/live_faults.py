"""A scenario's fault schedule over real sockets: where the chaos proxy goes, and the nemesis
target that carries every fault kind out on a live run.

`place_proxy` puts a `ChaosProxy` listener in front of each endpoint a node binds, for every
pair of nodes a fault of the scenario may touch (a rule whose ``from``/``to`` globs cover them, a
partition that separates them, a slow link between them): the binder keeps its real endpoint,
each connecter configured with it gets a listener of its own (so the proxy knows who it is),
and a node that announces its endpoint to peers (the package's ``advertised`` keys, e.g. a
Dafka node's beacon) announces a shared listener, where in-process connecters are named by
the source address the runtime gives them (``127.0.1.x``), external processes by which of them
holds the connecting socket (``connection_owner``, from /proc).

`LiveNemesis` is the nemesis target (`fault_injection.nemesis.NemesisTarget`) of a live run:
crashes, restarts and pauses go to `ProcessFaults` (in-process nodes or processes), partitions
and slow links to the proxy, on a wall-clock schedule; clock skew is refused before the run.
"""

from __future__ import annotations

import fnmatch
import heapq
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fault_injection import nemesis
from fault_injection.netfaults import NEMESIS, FaultEvent
from fault_injection.partitions import PartitionTable, matcher
from fault_injection.process import ProcessFaults
from fault_injection.naming import codec_classifier, codec_fields
from fault_injection.proxy import ChaosProxy, LinkSpec
from fault_injection.rules import DistSpec
from harness.checkers.base import CRASH, RESTART, Observer
from harness.packages.base import ProtocolPackage
from harness.scenario import Scenario

SOURCE_NET = "127.0.1."  # in-process node i connects from 127.0.1.(i + 2)
CLOCK_SKEW_REFUSED = ("clock_skew cannot run --live: real processes read the host's clock, which the "
                      "harness cannot move (run this scenario in simulation)")


def refusal(scenario: Scenario) -> str | None:
    """Why the scenario's faults cannot run live, in one line, or None."""
    if any(isinstance(f, nemesis.ClockSkew) for f in scenario.faults):
        return CLOCK_SKEW_REFUSED
    return None


def needs_proxy(scenario: Scenario) -> bool:
    return bool(len(scenario.rules)) or any(isinstance(f, (nemesis.Partition, nemesis.SlowLink))
                                            for f in scenario.faults)


def pair_touched(scenario: Scenario) -> Callable[[str, str], bool]:
    """Whether some network fault of the scenario may act between two nodes (either way)."""
    rules = scenario.rules.rules
    parts = PartitionTable()
    slow: list[tuple[Callable[[str], bool], Callable[[str], bool]]] = []
    for f in scenario.faults:
        if isinstance(f, nemesis.Partition):
            parts.add(f.groups, f.one_way)
        elif isinstance(f, nemesis.SlowLink):
            slow.append((matcher(f.src), matcher(f.dst)))

    def one_way(a: str, b: str) -> bool:
        return (any(fnmatch.fnmatchcase(a, r.match.src) and fnmatch.fnmatchcase(b, r.match.dst) for r in rules)
                or any(parts.cut_by(pid, a, b) for pid in parts.active())
                or any(s(a) and d(b) for s, d in slow))

    return lambda a, b: one_way(a, b) or one_way(b, a)


def _mentions(value: Any, endpoint: str) -> bool:
    if isinstance(value, str):
        return value == endpoint
    if isinstance(value, (list, tuple)):
        return any(_mentions(v, endpoint) for v in value)
    if isinstance(value, dict):
        return any(_mentions(v, endpoint) for v in value.values())
    return False


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new if value == old else value
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace(v, old, new) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    return value


def source_addresses_work() -> bool:
    """Whether this host routes all of 127.0.0.0/8 to loopback (Linux does; others may not)."""
    with socket.socket() as s:
        try:
            s.bind((SOURCE_NET + "2", 0))
        except OSError:
            return False
    return True


def _local_inode(addr: tuple[str, int]) -> str | None:
    """The inode of the TCP socket whose local address is ``addr`` (Linux's /proc/net/tcp)."""
    want = f"{socket.inet_aton(addr[0])[::-1].hex().upper()}:{addr[1]:04X}"
    try:
        with open("/proc/net/tcp") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[1] == want:
                    return fields[9]
    except OSError:
        return None
    return None


def _group_members(pgid: int) -> list[int]:
    out = [pgid]
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pgid:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def connection_owner(addr: tuple[str, int], pids: dict[str, int | None]) -> str | None:
    """Which of the processes (node -> pid, each the leader of its process group) holds the
    connecting socket whose local address is ``addr``; None if none does or the host has no
    /proc. How the proxy names an external process that connects to a shared listener."""
    inode = _local_inode(addr)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for node, pid in pids.items():
        if pid is None:
            continue
        for member in _group_members(pid):
            try:
                fds = os.listdir(f"/proc/{member}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{member}/fd/{fd}") == target:
                        return node
                except OSError:
                    continue
    return None


@dataclass
class ProxyPlacement:
    proxy: ChaosProxy
    sources: dict[str, str] = field(default_factory=dict)  # in-process node -> its source address
    advertised: dict[str, str] = field(default_factory=dict)  # real endpoint -> shared listener
    links: int = 0


def place_proxy(scenario: Scenario, pkg: ProtocolPackage, configs: dict[str, tuple[str, dict[str, Any]]],
                owners: dict[str, str], in_process: Sequence[str], seed: int, clock: Callable[[], int],
                name_socket: Callable[[str, str], str] | None = None,
                welcome_of: Callable[[str, str], bytes | None] | None = None,
                identify: Callable[[tuple[str, int]], str | None] | None = None) -> ProxyPlacement:
    """Create the proxy and its listeners, and rewrite ``configs`` in place so connecters (and
    announcements) use the listeners. ``owners`` maps each real endpoint to the node binding it."""
    proxy = ChaosProxy(rules=scenario.rules, seed=seed, classify=codec_classifier(scenario.protocol,
                                                                                  scenario.dialect),
                       clock=clock, name_socket=name_socket, welcome_of=welcome_of, identify=identify,
                       fields_of=codec_fields(scenario.protocol, scenario.dialect))
    placement = ProxyPlacement(proxy)
    touched = pair_touched(scenario)
    try:
        for endpoint, binder in owners.items():
            for node, (_, cfg) in configs.items():
                if node != binder and _mentions(cfg, endpoint) and touched(binder, node):
                    listener = proxy.add_link(LinkSpec(endpoint, binder=binder, connecter=node))
                    configs[node] = (configs[node][0], _replace(cfg, endpoint, listener))
                    placement.links += 1
            bcfg = configs[binder][1]
            for bind_key, announce_key in pkg.advertised.items():
                if bcfg.get(bind_key) == endpoint and any(touched(binder, n) for n in configs if n != binder):
                    shared = proxy.add_link(LinkSpec(endpoint, binder=binder))
                    bcfg[announce_key] = shared
                    placement.advertised[endpoint] = shared
                    placement.links += 1
        if placement.advertised and source_addresses_work():
            for i, node in enumerate(in_process):
                placement.sources[node] = f"{SOURCE_NET}{i + 2}"
                proxy.name_source(placement.sources[node], node)
    except BaseException:
        proxy.stop()
        raise
    return placement


class LiveNemesis:
    """The nemesis target of a live run. ``schedule`` keeps callbacks in a heap the run loop
    empties in time order (``due``/``next_at``); faults act at once when called."""

    def __init__(self, processes: ProcessFaults, proxy: ChaosProxy | None, observer: Observer,
                 on_observer: Callable[[Callable[[], None]], Any], clock: Callable[[], int]) -> None:
        self.processes = processes
        self.proxy = proxy
        self.observer = observer
        self.on_observer = on_observer  # runs a call where the checkers live (the runtime loop)
        self.clock = clock
        self._heap: list[tuple[int, int, Callable[[], object]]] = []
        self._seq = 0

    # -- the schedule

    def schedule(self, at_ns: int, fn: Callable[[], object]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at_ns, self._seq, fn))

    def next_at(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> Callable[[], object]:
        return heapq.heappop(self._heap)[2]

    # -- process faults

    def crash(self, node: str) -> None:
        self.processes.crash(node)
        self.on_observer(lambda: self.observer.emit(self.clock(), node, CRASH))

    def restart(self, node: str) -> None:
        self.processes.restart(node)
        self.on_observer(lambda: self.observer.emit(self.clock(), node, RESTART))

    def pause(self, node: str) -> None:
        self.processes.pause(node)

    def resume(self, node: str) -> None:
        self.processes.resume(node)

    # -- network faults

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False) -> int:
        return self._proxy().partition(groups, one_way)

    def heal(self, pid: int | None = None) -> None:
        self._proxy().heal(pid)

    def slow_link(self, src: str, dst: str, latency: DistSpec) -> int:
        return self._proxy().slow_link(src, dst, latency)

    def restore_link(self, lid: int) -> None:
        self._proxy().restore_link(lid)

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None:
        raise RuntimeError(CLOCK_SKEW_REFUSED)

    def _proxy(self) -> ChaosProxy:
        if self.proxy is None:  # needs_proxy said no: the fault touches no proxied pair
            raise RuntimeError("a network fault fired on a run without the proxy")
        return self.proxy


def emit_rows(trace: Any, events: Sequence[FaultEvent]) -> None:
    """Write fault rows into a TraceWriter (on the thread that owns it)."""
    for ev in events:
        trace.emit(ev.node, ev.kind, ev.time_ns, **ev.row())


__all__ = ["CLOCK_SKEW_REFUSED", "LiveNemesis", "NEMESIS", "ProxyPlacement", "emit_rows", "needs_proxy",
           "pair_touched", "place_proxy", "refusal"]
