"""The shipped Raft chaos files (scenarios/raft/chaos/*.yaml) with the peers as external
processes: the same faults and checks, live, with the peer group's ``command`` one of

* ``standin``: tests/standins/raft_peer.py, a peer written from the document alone (other
  choices than the reference wherever the document leaves one; see its docstring);
* ``standin-zmq-raft``: the same stand-in with two habits of node-zmq-raft's: its debounce cache
  (a repeated AppendEntries or InstallSnapshot gets the last reply again, whatever the term is by
  then, E-RAFT-04) and its default ``preventSpiralElections`` (a candidate that has not heard
  from a majority disregards higher terms in vote requests and answers, and starts no new
  election; E-RAFT-34), and its leader's way to end a snapshot transfer (only an answer without
  an offset ends it);
* ``standin-harness``: the same stand-in writing its snapshots in the harness's documented
  ``zmq-harness/raft-snapshot-1`` format (``standin`` writes JSON of its own shape);
* ``reference``: ``zmq-harness node raft peer`` (the reference peer as an outside program: the
  baseline, so that a failure both show is the harness's or the machine's, and one only the
  stand-in shows is a stand-in defect or a check that assumes the reference's habits).

Crashes (``crash: leader`` too), restarts and pauses act on the processes; partitions, slow
links and message rules on the ZMTP proxy between them, which also shows the checkers what the
peers say to each other; the harness's own clients drive the workload. A process reads the host's
clock, which the harness cannot move: a clock skew of the peers is left out and the run says so
(one of the harness's clients is skewed as the file says).

    python -m bench.raft_external --impl standin --impl reference --seeds 1-2
    python -m bench.raft_external --file leader-crash --impl standin --seeds 1 --rerun
    python -m bench.raft_external --file partitions --compact 15 --impl standin --impl standin-harness --seeds 1-2

``--mixed`` runs one peer only (the file's last, renamed ``ext``) as the external process, beside
the harness's in-process reference peers (`mixed_text`): a mixed cluster, where what the external
peer sends the others shows only as their receipts.

    python -m bench.raft_external --mixed --impl standin --seeds 1-3

``--mutant GLOB`` runs, instead of ``--impl``, each reference peer mutant whose name matches
(``zmq-harness node raft peer ... --mutant NAME``, `reference_nodes/raft/mutants.py`) as the
external peers (every peer, or with ``--mixed`` the one): a run that passes is a mutant the
chaos checks did not catch with the peers external.

    python -m bench.raft_external --file leader-crash --mutant '*' --seeds 1
    python -m bench.raft_external --file leader-crash --mixed --mutant 'vote-*' --seeds 1

``--compact N`` switches log compaction on in every file run (the peer group's ``snapshot_every``,
which the stand-in takes as ``--compact-every``; snapshot-install.yaml compacts already).

Prints one line per run (and a rerun of a failed one with ``--rerun``); ``--json FILE`` keeps
every verdict. The slow tests tests/live/test_raft_external_chaos.py and
tests/live/test_raft_standin_snapshots.py (with compaction) run a few of these.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAOS = ROOT / "scenarios" / "raft" / "chaos"
STANDIN = ROOT / "tests" / "standins" / "raft_peer.py"

_STANDIN = (f"{{python}} {shlex.quote(str(STANDIN))} --id {{id}} --endpoint {{endpoint}} --peers {{peers}} "
            "--data-dir {data_dir} --election-min {election_min_ms} --election-max {election_max_ms} "
            "--seed {seed} --broadcast {broadcast}")
COMMANDS = {
    "standin": _STANDIN,
    "standin-harness": _STANDIN + " --snapshot-format harness",
    # node-zmq-raft's habits (see above)
    "standin-zmq-raft": _STANDIN + " --replay-cache --prevent-spiral --done-without-offset",
    "reference": ("{zmq_harness} node raft peer --set id={id} --set endpoint={endpoint} --set peers={peers} "
                  "--set broadcast_url={broadcast} --set election_min={election_min_ms}ms "
                  "--set election_max={election_max_ms}ms --data-dir {data_dir}"),
}
READY = {"reference": {"line": "READY"}}  # the stand-in prints nothing: ready when its port accepts


def files() -> list[str]:
    return sorted(p.stem for p in CHAOS.glob("*.yaml"))


# the group's settings the stand-in has a flag for (its own defaults stand for the others: it
# keeps no entry after a snapshot, pipelines nothing, sends 32 entries per AppendEntries)
STANDIN_FLAGS = {"snapshot_every": "--compact-every", "chunk_size": "--chunk-size"}


def peer_settings(config: dict[str, Any], impl: str) -> str:
    """The group's own peer settings, passed on to the reference peer (`--set`), or to the
    stand-in where it has a flag for one (`STANDIN_FLAGS`)."""
    from harness.registry import package

    settings = package("raft").roles["peer"].settings
    out = []
    for name in config:
        key = settings[name].key
        if name in ("election_min", "election_max", "cluster"):
            continue  # on the command line already, or a placeholder of its own
        if impl == "reference":
            out.append(f"--set {name}={{{key}}}" + ("ms" if key.endswith("_ms") else ""))
        elif name in STANDIN_FLAGS and command_is_standin(impl):
            out.append(f"{STANDIN_FLAGS[name]} {{{key}}}")
    return "".join(" " + s for s in out)


def command_is_standin(impl: str) -> bool:
    return impl.startswith("standin")


MUTANT = "mutant:"  # an impl ``mutant:NAME``: the reference peer broken on purpose


def command_of(impl: str) -> str:
    """The command line of ``impl``: one of `COMMANDS`, or ``mutant:NAME``."""
    if impl.startswith(MUTANT):
        return COMMANDS["reference"] + f" --mutant {impl.removeprefix(MUTANT)}"
    return COMMANDS[impl]


def base_impl(impl: str) -> str:
    """What the command's settings and readiness follow: a mutant runs as the reference does."""
    return "reference" if impl.startswith(MUTANT) else impl


def peer_mutants(pattern: str) -> list[str]:
    """The reference peer mutants whose names match ``pattern`` (a glob), as impls."""
    import fnmatch

    from reference_nodes.raft.mutants import MUTANTS

    return [MUTANT + name for name, (role, _f, _c) in MUTANTS.items() if role == "peer"
            and fnmatch.fnmatch(name, pattern)]


def external_text(name: str, impl: str, command: str | None = None,
                  compact: int | None = None) -> tuple[str, list[str]]:
    """The chaos file ``name`` as YAML with its peer group run by ``command`` (default: the
    implementation ``impl`` of `COMMANDS`, with the group's settings it has flags for), and what
    had to be left out (the peers' clock skews). ``compact``: the group's ``snapshot_every``."""
    data = yaml.safe_load((CHAOS / f"{name}.yaml").read_text())
    group = data["nodes"]["peers"]
    if compact:
        group["config"] = {**(group.get("config") or {}), "snapshot_every": compact}
    group["command"] = (command or command_of(impl)) + peer_settings(group.get("config") or {}, base_impl(impl))
    if base_impl(impl) in READY:
        group["ready"] = READY[base_impl(impl)]

    def peers_clock(f: dict[str, Any]) -> bool:  # a skew of the peers' clocks: the processes read the host's
        return "clock_skew" in f and not str(f["clock_skew"]).startswith("clients")

    left_out = [f"clock_skew {f['clock_skew']}" for f in data.get("faults") or [] if peers_clock(f)]
    data["faults"] = [f for f in data.get("faults") or [] if not peers_clock(f)]
    data["name"] = f"{data['name']}-{impl}"
    return yaml.safe_dump(data, sort_keys=False), left_out


MIXED_NODE = "ext"  # the external peer of a mixed cluster (`mixed_text`)


def mixed_text(name: str, impl: str, command: str | None = None, compact: int | None = None,
               config: dict[str, Any] | None = None) -> tuple[str, list[str]]:
    """The chaos file ``name`` as YAML with one external peer beside the harness's reference
    peers: its last peer becomes the group ``ext`` run by ``command`` (as in `external_text`;
    ``config``: settings of its own on top of the peers' group's, e.g. a shorter election timeout
    so that it leads first), the others stay in-process. The faults follow it: ``peers.<last>``
    becomes ``ext`` and the whole group ``peers`` the role ``peer``; a clock skew of it is left
    out (a process reads the host's clock)."""
    data = yaml.safe_load((CHAOS / f"{name}.yaml").read_text())
    group = data["nodes"]["peers"]
    if compact:
        group["config"] = {**(group.get("config") or {}), "snapshot_every": compact}
    last = f"peers.{group['count'] - 1}"
    group["count"] -= 1
    ext = {"role": "peer", "config": {**(group.get("config") or {}), **(config or {})}}
    ext["command"] = (command or command_of(impl)) + peer_settings(ext["config"], base_impl(impl))
    if base_impl(impl) in READY:
        ext["ready"] = READY[base_impl(impl)]
    data["nodes"] = {k: v for n, g in data["nodes"].items()
                     for k, v in ([(n, g), (MIXED_NODE, ext)] if n == "peers" else [(n, g)])}

    def follow(v: Any) -> Any:
        if isinstance(v, list):
            return [follow(x) for x in v]
        if isinstance(v, dict):
            return {k: follow(x) for k, x in v.items()}
        return {last: MIXED_NODE, "peers": "peer"}.get(v, v) if isinstance(v, str) else v

    faults = [follow(f) for f in data.get("faults") or []]
    left_out = [f"clock_skew {f['clock_skew']}" for f in faults if f.get("clock_skew") in (MIXED_NODE, "peer")]
    data["faults"] = [f for f in faults if f.get("clock_skew") not in (MIXED_NODE, "peer")]
    data["name"] = f"{data['name']}-mixed-{impl}"
    return yaml.safe_dump(data, sort_keys=False), left_out


def external_scenario(name: str, impl: str, command: str | None = None,
                      compact: int | None = None, mixed: bool = False,
                      config: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    """The chaos file ``name`` with its peers external (`external_text`), or with one external
    peer beside the harness's (``mixed``, `mixed_text`)."""
    from harness.scenario import parse_scenario

    if mixed:
        text, left_out = mixed_text(name, impl, command, compact, config)
        return parse_scenario(text, f"{CHAOS / name}.yaml (one {impl} peer)"), left_out
    text, left_out = external_text(name, impl, command, compact)
    return parse_scenario(text, f"{CHAOS / name}.yaml ({impl} peers)"), left_out


@dataclass
class Run:
    file: str
    impl: str
    seed: int
    ok: bool
    wall_s: float
    failed: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    proxy: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1
    compact: int | None = None

    def line(self) -> str:
        what = self.file + (f" compact {self.compact}" if self.compact else "")
        head = f"{what:33} {self.impl:24} seed {self.seed:<3} try {self.attempt} " \
               f"{'pass' if self.ok else 'FAIL'} {self.wall_s:6.1f} s"
        tail = "".join(f"\n    {v['check']}: {v['detail'][:300]}" for v in self.failed)
        return head + tail


def run_sim_mutant(name: str, impl: str, seed: int, mixed: bool = False) -> Run:
    """The baseline of a mutant's live run: the chaos file as shipped, in simulation, with the
    same peers broken (every peer, or with ``mixed`` the last)."""
    from harness.composition import run_sim
    from harness.scenario import load_scenario
    from reference_nodes.raft.mutants import MUTANTS

    scenario = load_scenario(str(CHAOS / f"{name}.yaml"))
    peers = scenario.groups["peers"].nodes
    factory = MUTANTS[impl.removeprefix(MUTANT)][1]
    started = time.monotonic()
    result = run_sim(scenario, seed, factories={n: factory for n in (peers[-1:] if mixed else peers)})
    return Run(name, impl + " (sim)", seed, result.ok, round(time.monotonic() - started, 1),
               [{"check": v.check, "clause": v.clause, "detail": v.detail} for v in result.failed])


def run_one(name: str, impl: str, seed: int, out_dir: str, attempt: int = 1, command: str | None = None,
            compact: int | None = None, mixed: bool = False) -> Run:
    from harness.composition import run_live

    scenario, left_out = external_scenario(name, impl, command, compact, mixed)
    started = time.monotonic()
    tag = (f"-c{compact}" if compact else "") + ("-mixed" if mixed else "")
    result = run_live(scenario, seed, str(Path(out_dir) / f"{name}{tag}-{impl}-{seed}-{attempt}"))
    proxy = result.stats.get("proxy") or {}
    return Run(name, impl, seed, result.ok, round(time.monotonic() - started, 1),
               [{"check": v.check, "clause": v.clause, "detail": v.detail} for v in result.failed], left_out,
               {k: proxy.get(k) for k in ("messages", "effects", "refused")}, attempt, compact)


def sweep(names: list[str], impls: list[str], seeds: list[int], out_dir: str, rerun: bool = False,
          echo: Any = print, compact: int | None = None, mixed: bool = False, sim: bool = False) -> list[Run]:
    runs = []
    for name in names:
        for seed in seeds:
            for impl in impls:
                if sim and impl.startswith(MUTANT):  # the same mutant in simulation first: the baseline
                    base = run_sim_mutant(name, impl, seed, mixed)
                    runs.append(base)
                    echo(base.line())
                run = run_one(name, impl, seed, out_dir, compact=compact, mixed=mixed)
                runs.append(run)
                echo(run.line())
                if rerun and not run.ok:  # a loaded machine: say whether it fails again
                    again = run_one(name, impl, seed, out_dir, attempt=2, compact=compact, mixed=mixed)
                    runs.append(again)
                    echo(again.line())
    return runs


def seed_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", action="append", choices=files(), help="a chaos file (default: all)")
    ap.add_argument("--impl", action="append", choices=sorted(COMMANDS), help="peers to run (default: standin and reference)")
    ap.add_argument("--seeds", default="1-2")
    ap.add_argument("--rerun", action="store_true", help="run a failed run once more")
    ap.add_argument("--out", help="traces and verdicts (default: a temporary directory)")
    ap.add_argument("--json", help="write every run's verdicts here")
    ap.add_argument("--compact", type=int, help="compact the peers' logs every N applied entries (snapshot_every)")
    ap.add_argument("--mixed", action="store_true", help="one external peer beside the harness's reference peers")
    ap.add_argument("--mutant", metavar="GLOB", help="instead of --impl: each reference peer mutant matching GLOB "
                    "as the external peers (a run that passes is a mutant not caught)")
    ap.add_argument("--sim", action="store_true", help="with --mutant: run each mutant in simulation first, on the "
                    "file as shipped (a mutant simulation catches and the live run does not is a gap)")
    args = ap.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="raft-external-")
    started = time.monotonic()
    impls = peer_mutants(args.mutant) if args.mutant else (args.impl or ["standin", "reference"])
    runs = sweep(args.file or files(), impls, seed_list(args.seeds), out, args.rerun,
                 compact=args.compact, mixed=args.mixed, sim=args.sim)
    for note in sorted({n for r in runs for n in r.left_out}):
        print(f"left out (a process reads the host's clock): {note}")
    firsts = [r for r in runs if r.attempt == 1 and not r.impl.endswith("(sim)")]
    print(f"{sum(r.ok for r in firsts)}/{len(firsts)} passed at the first try, "
          f"{sum(r.ok for r in runs if r.attempt == 2)}/{sum(r.attempt == 2 for r in runs)} reruns passed; "
          f"{time.monotonic() - started:.0f} s; traces in {out}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in runs], indent=1))
    return 0 if all(r.ok for r in firsts) else 1


if __name__ == "__main__":
    sys.exit(main())
