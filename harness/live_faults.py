"""Where the chaos proxy goes on a live run, so a scenario's message rules, partitions and slow
links act over real sockets as they do in simulation.

`place_proxy` puts a `ChaosProxy` listener in front of each endpoint a node binds, for every
pair of nodes a fault of the scenario may touch (a rule whose ``from``/``to`` globs cover them, a
partition that may separate them, a slow link that may join them; a target known only when its
fault fires — ``any``, ``random``, ``leader`` — may touch any node): the binder keeps its real
endpoint, each connecter configured with it gets a listener of its own (so the proxy knows who
it is), and a node that announces its endpoint to peers (the package's ``advertised`` keys, e.g.
a Dafka node's beacon) announces a shared listener, where in-process connecters are named by the
source address the runtime gives them (``127.0.1.x``) and processes by which of them holds the
connecting socket (`connection_owner`, from /proc).

The live runtime then carries the faults out through the proxy (`LiveRuntime.attach_proxy`);
the nemesis schedules them the same way as in simulation.

The proxy also sits between every two external nodes (groups with a ``command``) that talk to
each other, fault or not, when the scenario observes them (``live: {observe: ...}``, by default
for a protocol whose checks were reviewed for it), and for a protocol whose checks were reviewed
for that too (PPPP) between an external node and every node it talks to: it reports the external
side of their messages, which no probe sees, to the run's checkers (`observed_pairs`,
`harness.live_observe`).
"""

from __future__ import annotations

import fnmatch
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fault_injection import nemesis
from fault_injection.naming import codec_classifier, codec_fields, codec_malformed
from fault_injection.proxy import ChaosProxy, LinkSpec
from harness.live.procnet import connection_inode, socket_inodes
from harness.packages.base import ProtocolPackage
from harness.scenario import Scenario

SOURCE_NET = "127.0.1."  # in-process node i connects from 127.0.1.(i + 2)


def needs_proxy(scenario: Scenario) -> bool:
    observed = observed_nodes(scenario)
    return (bool(len(scenario.rules)) or any(isinstance(f, (nemesis.Partition, nemesis.SlowLink))
                                             for f in scenario.faults)
            or len(observed) >= 2 or (bool(observed) and _all_links(scenario)))


def _all_links(scenario: Scenario) -> bool:
    """Whether an external node's traffic with the harness's nodes is observed as well (the
    package's checks were reviewed for it, `ProtocolPackage.observed_links`), not only its
    traffic with other external nodes."""
    from harness.registry import package  # noqa: PLC0415 - the registry imports the packages

    return package(scenario.protocol).observed_links == "all"


def observed_nodes(scenario: Scenario) -> set[str]:
    """The external nodes whose traffic the proxy reports (none when the scenario does not
    observe them)."""
    if not scenario.observe:
        return set()
    return {n for g in scenario.external for n in g.nodes}


def observed_pairs(scenario: Scenario) -> Callable[[str, str], bool]:
    """Whether the proxy reports the messages from one node to another: both are external, or
    (`_all_links`) one of them is (`harness.live_observe` passes on only the external side's)."""
    nodes = observed_nodes(scenario)
    if _all_links(scenario):
        return lambda a, b: a in nodes or b in nodes
    return lambda a, b: a in nodes and b in nodes


def nodes_of(scenario: Scenario, target: str) -> set[str]:
    """The nodes a target may name when its fault fires: all of them for a dynamic one."""
    if target == nemesis.REST:
        return set(scenario.node_names)
    for prefix in ("any:", "random:"):  # one node of a set: some node of that set
        if target.startswith(prefix):
            target = target[len(prefix):]
    static = scenario.targets.static(target)
    return set(scenario.node_names) if static is None else set(static)


def pair_touched(scenario: Scenario) -> Callable[[str, str], bool]:
    """Whether some network fault of the scenario may act between two nodes (either way)."""
    rules = scenario.rules.rules
    apart: list[list[set[str]]] = []  # per partition, the nodes each side may name
    joined: list[tuple[set[str], set[str]]] = []
    for f in scenario.faults:
        if isinstance(f, nemesis.Partition):
            apart.append([set().union(*(nodes_of(scenario, t) for t in side)) for side in f.sides])
        elif isinstance(f, nemesis.SlowLink):
            joined.append((nodes_of(scenario, f.src), nodes_of(scenario, f.dst)))

    def one_way(a: str, b: str) -> bool:
        return (any(fnmatch.fnmatchcase(a, r.match.src) and fnmatch.fnmatchcase(b, r.match.dst) for r in rules)
                or any(a in sides[i] and b in sides[j] for sides in apart
                       for i in range(len(sides)) for j in range(len(sides)) if i != j)
                or any(a in s and b in d for s, d in joined))

    return lambda a, b: one_way(a, b) or one_way(b, a)


def _in_text(endpoint: str) -> re.Pattern[str]:
    """The endpoint as a word of a text value (a Raft node's ``peers``: ``ID=URL,ID=URL``): not
    followed by another digit of a longer port."""
    return re.compile(re.escape(endpoint) + r"(?!\d)")


def _mentions(value: Any, endpoint: str) -> bool:
    if isinstance(value, str):
        return value == endpoint or _in_text(endpoint).search(value) is not None
    if isinstance(value, (list, tuple)):
        return any(_mentions(v, endpoint) for v in value)
    if isinstance(value, dict):
        return any(_mentions(v, endpoint) for v in value.values())
    return False


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new if value == old else _in_text(old).sub(new, value)
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


def connection_owner(addr: tuple[str, int], listener: tuple[str, int], pids: dict[str, int | None]) -> str | None:
    """Which of the processes (node -> pid, each the leader of its process group) holds the
    socket connected from ``addr`` to ``listener``; None if none does or the host has no
    /proc. How the proxy names an external process that connects to a shared listener."""
    inode = connection_inode(addr, listener)
    if inode is None:
        return None
    for node, pid in pids.items():
        if pid is not None and inode in socket_inodes(pid):
            return node
    return None


def _port(endpoint: str) -> int | None:
    tail = endpoint.rsplit(":", 1)[-1]
    return int(tail) if endpoint.startswith("tcp://") and tail.isdigit() else None


class ConsecutiveListeners:
    """Listeners for one connecter in front of a binder's consecutive ports are consecutive too
    (an Event BUS server's P, P+1, P+2): a program told only P finds the rest at P+1 and P+2
    behind the proxy as without it. Any free port when such a block is not to be had."""

    def __init__(self, owners: dict[str, str]) -> None:
        self.ports: dict[str, set[int]] = {}  # binder -> its ports
        for endpoint, binder in owners.items():
            port = _port(endpoint)
            if port is not None:
                self.ports.setdefault(binder, set()).add(port)
        self.last: dict[tuple[str, str], tuple[int, int]] = {}  # (binder, connecter) -> (real port, listener port)

    def add(self, proxy: ChaosProxy, link: LinkSpec, connecter: str) -> str:
        from fault_injection.relay import ProxyError  # noqa: PLC0415
        from harness.live.supervisor import free_port  # noqa: PLC0415

        binder, port = link.binder, _port(link.target)
        listen = None
        prev = self.last.get((binder, connecter))
        if port is not None and prev is not None and port == prev[0] + 1:
            listen = f"tcp://{proxy.host}:{prev[1] + 1}"
        elif port is not None and port + 1 in self.ports.get(binder, ()):
            run = 1
            while port + run in self.ports[binder]:
                run += 1
            listen = f"tcp://{proxy.host}:{free_port(proxy.host, count=run)}"
        try:
            endpoint = proxy.add_link(link, listen)
        except ProxyError:
            if listen is None:
                raise
            endpoint = proxy.add_link(link)
        if port is not None:
            self.last[(binder, connecter)] = (port, _port(endpoint) or 0)
        return endpoint


@dataclass
class ProxyPlacement:
    proxy: ChaosProxy
    sources: dict[str, str] = field(default_factory=dict)  # in-process node -> its source address
    advertised: dict[str, str] = field(default_factory=dict)  # real endpoint -> shared listener
    links: int = 0


def place_proxy(scenario: Scenario, pkg: ProtocolPackage, configs: dict[str, tuple[str, dict[str, Any]]],
                owners: dict[str, str], in_process: Sequence[str], seed: int, clock: Callable[[], int],
                **callbacks: Any) -> ProxyPlacement:
    """Create the proxy and its listeners, and rewrite ``configs`` in place so connecters (and
    announcements) use the listeners. ``owners`` maps each real endpoint to the node binding it;
    ``callbacks`` are the proxy's ``name_socket``, ``welcome_of`` and ``identify``."""
    observed = observed_pairs(scenario)
    proxy = ChaosProxy(rules=scenario.rules, seed=seed, classify=codec_classifier(scenario.protocol, scenario.dialect),
                       clock=clock, fields_of=codec_fields(scenario.protocol, scenario.dialect),
                       malformed=codec_malformed(scenario.protocol), observe=observed, **callbacks)
    placement = ProxyPlacement(proxy)
    faulted = pair_touched(scenario)

    def touched(a: str, b: str) -> bool:  # the proxy goes between them (observed pairs are symmetric)
        return faulted(a, b) or observed(a, b)

    listeners = ConsecutiveListeners(owners)
    try:
        for endpoint, binder in owners.items():
            for node, (_, cfg) in configs.items():
                if node != binder and _mentions(cfg, endpoint) and touched(binder, node):
                    listener = listeners.add(proxy, LinkSpec(endpoint, binder=binder, connecter=node), node)
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


def place_for_run(scenario: Scenario, pkg: ProtocolPackage, configs: dict[str, tuple[str, dict[str, Any]]],
                  assigned: dict[str, str], runtime: Any, processes: dict[str, Any], seed: int) -> ProxyPlacement:
    """`place_proxy` for a live run of the run driver, and the proxy handed to its runtime.
    ``assigned``: the endpoint allocator's ``node/purpose -> endpoint``; ``processes``: the run's
    external nodes (filled in later; read when a connection needs naming)."""
    owners = {ep: key.split("/", 1)[0] for key, ep in assigned.items()}
    in_process = [n for n in configs if not scenario.group_of(n).command]
    # an external node's bound sockets: by the purpose of their endpoints, where that is their name
    purposes = {ep: key.split("/", 1)[1] for key, ep in assigned.items() if "/" in key} if pkg.named_endpoints else {}
    in_process_set = frozenset(in_process)

    def name_socket(node: str, ep: str) -> str:
        if node in in_process_set:
            return socket_on(runtime, node, ep)
        return purposes.get(ep, "") if owners.get(ep) == node else ""

    placement = place_proxy(
        scenario, pkg, configs, owners, in_process, seed, lambda: runtime.now_ns,
        name_socket=name_socket,
        welcome_of=lambda node, ep: welcome_on(runtime, node, ep),
        identify=lambda addr, listener: connection_owner(addr, listener,
                                                        {n: p.process.pid for n, p in processes.items()}))
    runtime.attach_proxy(placement.proxy, placement.sources)
    return placement


def take_rows_back(placement: ProxyPlacement, runtime: Any) -> None:
    """Before the runtime stops: the proxy keeps its fault rows from now on (`stop_proxy`
    writes them), and the runtime writes those it was handed already."""
    placement.proxy.on_event = None
    placement.proxy.on_seen = None  # what it saw is queued on the runtime already
    if getattr(runtime, "running", False):
        runtime.call(lambda: None)  # runs after every row posted before it


def stop_proxy(placement: ProxyPlacement, trace: Any) -> None:
    """After the runtime stopped: stop the proxy and write the rows it kept."""
    placement.proxy.stop()
    if trace is not None and not trace.closed:
        for ev in placement.proxy.drain_events():
            trace.emit(ev.node, ev.kind, ev.time_ns, **ev.row())


def socket_on(runtime: Any, node: str, endpoint: str) -> str:
    """The name of the node's socket that binds or connects to ``endpoint`` ("" if unknown)."""
    for sockets in (runtime.endpoints(node), runtime.connected(node)):
        for name, eps in sockets.items():
            if endpoint in eps:
                return name
    return ""


def welcome_on(runtime: Any, node: str, endpoint: str) -> bytes | None:
    """The welcome message of the node's XPUB bound at ``endpoint`` (the simulator names it
    zmq.welcome), or None."""
    current = runtime.node(node)
    for spec in current.sockets() if current is not None else ():
        if endpoint in spec.bind:
            return spec.welcome
    return None


def proxy_stats(proxy: ChaosProxy) -> dict[str, Any]:
    """The proxy's counts for a run's stats (a stopped proxy's: final)."""
    s = proxy.stats()
    return {"connections": s.connections, "messages": s.messages, "by_type": dict(s.by_type),
            "effects": dict(s.effects), "opaque": dict(s.opaque), "unidentified": s.unidentified,
            "refused": s.refused, "resets": s.resets, "links": proxy.link_count(),
            "observed_sends": s.observed_sends, "observed_receives": s.observed_receives}


__all__ = ["ProxyPlacement", "connection_owner", "needs_proxy", "nodes_of", "observed_nodes", "observed_pairs",
           "pair_touched", "place_for_run", "place_proxy", "proxy_stats", "stop_proxy", "take_rows_back"]
