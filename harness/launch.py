"""What the run driver needs to put a scenario's nodes on a transport: endpoints (virtual in
simulation, free loopback ports live) and the implementations under test that a group's
``command`` starts as processes.

A command line gets placeholders filled in: ``{endpoint}`` (its first endpoint), ``{port}``,
``{host}``, ``{endpoint0}``, ``{endpoint1}``, ... (every endpoint the protocol's wiring gave
it), ``{name}``, ``{seed}``, ``{python}`` (this Python, quoted) and ``{zmq_harness}`` (the
`zmq-harness` command of this installation, so a scenario can run a reference node as an
"external" one without the virtual environment on PATH; a command whose first word is
``zmq-harness`` gets the same); ``{advertise}`` (the endpoint to
announce to peers: the chaos proxy's listener when one stands in front of it), ``{data_dir}``
(a directory of its own that survives restarts, emptied when a run starts; ``{datadir}`` is the
same, its older name), and every text or whole-number setting the node has after wiring
(``{connect}``, ``{towers}``: a list joined with ``,``, a list of lists with ``;``;
``{heartbeat_ms}``: a duration in ms).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from typing import Any

from harness.checkers.base import Verdict
from harness.live.external import ExternalNode, describe_exit

SIM_FIRST_PORT = 5000


PORTS_PER_NODE = 3  # live: a node's first endpoints are consecutive ports P, P+1, P+2


class EndpointAllocator:
    """``endpoint(node, purpose)``: the same endpoint for the same (node, purpose). Live, the
    first `PORTS_PER_NODE` endpoints of a node are consecutive ports, so an implementation
    started with ``{port}`` finds the others where its protocol puts them (an Event BUS server's
    publisher and collector at P+1 and P+2)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.assigned: dict[str, str] = {}
        self._spare: dict[str, list[int]] = {}  # live: node -> the rest of its block of ports

    def __call__(self, node: str, purpose: str) -> str:
        key = f"{node}/{purpose}"
        found = self.assigned.get(key)
        if found is None:
            if self.mode == "sim":
                found = f"tcp://{node}:{SIM_FIRST_PORT + len(self.assigned)}"
            else:
                first_time = node not in self._spare
                spare = self._spare.setdefault(node, [])
                if not spare:
                    from harness.live.supervisor import free_port  # noqa: PLC0415

                    n = PORTS_PER_NODE if first_time else 1
                    start = free_port(count=n)
                    spare.extend(range(start, start + n))
                found = f"tcp://127.0.0.1:{spare.pop(0)}"
            self.assigned[key] = found
        return found

    def of(self, node: str) -> list[str]:
        return [ep for key, ep in self.assigned.items() if key.startswith(node + "/")]


def zmq_harness_command() -> str:
    """The `zmq-harness` of this installation (beside this Python), or a ``-m`` fallback."""
    beside = os.path.join(os.path.dirname(sys.executable), "zmq-harness")
    if os.access(beside, os.X_OK):
        return shlex.quote(beside)
    return f"{shlex.quote(sys.executable)} -m harness.cli"


def own_zmq_harness(cmd: str) -> str:
    """A command that starts with the word ``zmq-harness`` runs this installation's (as
    ``{zmq_harness}`` does), so it works without the virtual environment on PATH."""
    word, sep, rest = cmd.lstrip().partition(" ")
    return "{zmq_harness}" + sep + rest if word == "zmq-harness" else cmd


def placeholders(name: str, endpoints: list[str], seed: int, config: dict[str, Any] | None = None,
                 advertised: dict[str, str] | None = None, datadir: str = "") -> dict[str, Any]:
    first = endpoints[0] if endpoints else ""
    port = first.rsplit(":", 1)[1] if first else ""
    return {**config_values(config or {}), "endpoint": first, "port": port, "host": "127.0.0.1", "name": name,
            "seed": seed, "python": shlex.quote(sys.executable), "zmq_harness": zmq_harness_command(),
            "advertise": (advertised or {}).get(first, first), "data_dir": datadir, "datadir": datadir,
            **{f"endpoint{i}": e for i, e in enumerate(endpoints)}}


def config_values(cfg: dict[str, Any]) -> dict[str, str]:
    """Text and whole-number settings as command-line values: a list joined with ``,``, a list
    of lists with ``;`` between them (``--set towers=xsub,xpub;xsub2,xpub2``)."""
    out = {}
    for key, value in cfg.items():
        if not key.isidentifier():
            continue
        if isinstance(value, str):
            out[key] = value
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = str(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            out[key] = ",".join(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (list, tuple)) for v in value):
            out[key] = ";".join(",".join(map(str, v)) for v in value)
    return out


def external_node(scenario: Any, group: Any, name: str, role: str, seed: int, endpoints: EndpointAllocator,
                  out_dir: str | None, config: dict[str, Any] | None = None,
                  advertised: dict[str, str] | None = None) -> ExternalNode:
    """The process of a ``command`` group's node, not started yet (`start_process`)."""
    import tempfile  # noqa: PLC0415

    from harness.live.supervisor import ManagedProcess  # noqa: PLC0415

    eps = endpoints.of(name)
    if out_dir:
        datadir = os.path.join(out_dir, slug(scenario.name), "data", name)
        # Kept across the node's restarts within this run, never from an earlier run in the same
        # out dir: a peer that came back with another run's log would be judged as if it had it
        # from this one (a Raft run blamed it for entries it "never received").
        shutil.rmtree(datadir, ignore_errors=True)
        os.makedirs(datadir)
    else:
        datadir = tempfile.mkdtemp(prefix=f"zmq-harness-{name}-")
    values = placeholders(name, eps, seed, config, advertised, datadir)
    port = int(values["port"]) if values["port"] else None
    log = os.path.join(out_dir, slug(scenario.name), f"{name}.log") if out_dir else None
    proc = ManagedProcess(own_zmq_harness(group.command), values=values, ready=ready_check(group.ready, port),
                          name=name, log_path=log)
    return ExternalNode(proc, role, group.implementation)


def ready_check(spec: dict[str, Any] | None, port: int | None) -> Any:
    """How to tell the process is ready: a line it prints, its port accepting, or a delay."""
    from harness.live.supervisor import ReadyDelay, ReadyLine, ReadyPort  # noqa: PLC0415
    from harness.packages.base import as_duration  # noqa: PLC0415

    spec = spec or {}
    timeout = as_duration(spec["timeout"]) / 1e9 if "timeout" in spec else 10.0
    if "line" in spec:
        return ReadyLine(str(spec["line"]), timeout=timeout)
    if "delay" in spec:
        return ReadyDelay(as_duration(spec["delay"]) / 1e9)
    if "port" in spec or port is not None:
        return ReadyPort(int(spec.get("port", port)), timeout=timeout)
    return ReadyDelay(0.5)


def start_process(node: ExternalNode) -> None:
    from harness.composition import RunError  # noqa: PLC0415
    from harness.live.supervisor import SupervisorError  # noqa: PLC0415

    try:
        node.process.start()
    except SupervisorError as exc:
        raise RunError(f"the implementation {node.process.name} did not start: {exc}") from None


def process_verdicts(processes: dict[str, ExternalNode]) -> list[Verdict]:
    """``process-alive`` fails for a process that ended by itself with a failure (a non-zero
    status, a signal) or did not come back after a restart; one the scenario's faults killed (and
    did not restart) is down on purpose. Status 0 is a program's own, normal end (a client that
    exits once its work is out): said in a passing verdict, and what it left undone is for the
    protocol's checks to judge."""
    out = []
    for name, node in processes.items():
        p = node.process
        if node.restart_errors:
            out.append(Verdict("process-alive", "", False, f"{name} did not come back after a restart: "
                               f"{node.restart_errors[0]}"))
        elif node.exited_by_itself and p.returncode == 0:
            out.append(Verdict("process-alive", "", True, f"{name} ended by itself with status 0 (its normal end)"))
        elif node.exited_by_itself:
            out.append(Verdict("process-alive", "", False,
                               f"{name} exited with {describe_exit(p.returncode)}: {p.tail(5)}"))
    return out


def slug(name: str) -> str:
    """A scenario name as a directory name."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name.lower()).strip("-") or "scenario"
