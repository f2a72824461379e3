"""The shipped Dafka, Event BUS, PPPP and DCP chaos files with one group run as an external process:
the independent stand-in of its role (tests/standins/) and, as a baseline, the reference node
as the same kind of external command. The file's faults and checks are kept; a workload that
names the external group is dropped (an external node publishes by itself: its command says how
much). A verdict both variants fail is the harness's or the machine's; one only the stand-in
fails is a stand-in defect or a false alarm.

    .venv/bin/python -m bench.chaos_standins --seeds 1-2            # every entry, both variants
    .venv/bin/python -m bench.chaos_standins --only pp- --variant standin --seeds 1
    .venv/bin/python -m bench.chaos_standins --list

Each run is a child process (`--one ID VARIANT SEED`) with a timeout, so a hung run cannot hang
the sweep; one JSON line per run goes to ``--out`` (default: stdout only); a failed run's trace is
kept under ``$TMPDIR/chaos-standins-failed/`` (its path in the line's ``kept``). Live and
timing-sensitive: run it under ``nice`` on a shared machine, bounded by ``--only``/``--seeds``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

ROOT = Path(__file__).resolve().parents[1]
READY = {"line": "READY", "timeout": "20s"}
KEEP_DIR = os.path.join(tempfile.gettempdir(), "chaos-standins-failed")  # the traces of failed runs


@dataclass(frozen=True)
class Entry:
    """One group of one shipped chaos file run as an external command."""

    id: str
    file: str  # under scenarios/
    group: str
    standin: str
    reference: str
    ready_line: bool = False  # the stand-in and the reference print READY (Dafka)
    towers: str | None = None  # also run this tower group external (reference tower)
    independent: str = ""  # Dafka: the node written from the document alone (tests/standins/dafka_independent.py)


# ---- Event BUS ---------------------------------------------------------------------------------
def eb_client(subtrees: list[str], publish: int = 0, topic: str = "", config: dict[str, str] | None = None) -> tuple[str, str]:
    """(stand-in, reference) commands of an Event BUS client on ``subtrees`` publishing
    ``publish`` events on ``topic`` by itself (the workload cannot drive it)."""
    standin = "{python} tests/standins/eventbus_client.py --endpoint {server} --run-s 30"
    reference = "{zmq_harness} node eventbus client --identity {name} --set servers={snapshots}"
    if subtrees:
        standin += f" --subtrees '{';'.join(subtrees)}'"
        reference += f" --set 'subtrees=[{', '.join(subtrees)}]'"
    if publish:
        standin += f" --publish {publish} --topic {topic}"
        reference += f" --set publish={publish} --set topic={topic}"
    for key, value in (config or {}).items():
        reference += f" --set {key}={value}"
    return standin, reference


EB_SERVER = ("{python} tests/standins/eventbus_server.py --host 127.0.0.1 --port {port} --state {data_dir}/state",
             "{zmq_harness} node eventbus server --bind {endpoint} --data-dir {data_dir}")


def entries_of(prefix: str, folder: str, **extra: Any) -> Callable[..., Entry]:
    """A protocol's entry builder: ``(ID, FILE, GROUP, (standin, reference), **more)`` -> the entry
    ``PREFIX-ID`` of ``scenarios/FOLDER/FILE.yaml`` (``extra``: fields every entry of it has)."""

    def entry(id_: str, file: str, group: str, commands: tuple[str, str], **more: Any) -> Entry:
        return Entry(f"{prefix}-{id_}", f"{folder}/{file}.yaml", group, *commands, **extra, **more)

    return entry


eb = entries_of("eb", "eventbus/chaos")


EVENTBUS = [
    eb("clean-all", "clean", "all", eb_client([])),
    eb("clean-weather", "clean", "weather", eb_client(["/weather/"], 25, "/weather/rain")),
    eb("clean-bus", "clean", "bus", EB_SERVER),
    eb("crash-pubs", "client-crash-late-join", "pubs", eb_client(["/orders/"], 40, "/orders/eu/1")),
    eb("crash-late", "client-crash-late-join", "late", eb_client(["/orders/eu/", "/orders/us/"])),
    eb("crash-bus", "client-crash-late-join", "bus", EB_SERVER),
    eb("failover-clients", "failover", "clients",
       eb_client(["/a/", "/b/"], 30, "/b/y", {"resync": "300ms", "sync_timeout": "300ms", "publish_timeout": "500ms"})),
    eb("failover-late", "failover", "late", eb_client(["/b/"])),
    eb("hundred-bus", "hundred-clients", "bus", EB_SERVER),
    eb("lossy-all", "lossy", "all", eb_client([], config={"resync": "400ms"})),
    eb("lossy-weather", "lossy", "weather",
       eb_client(["/weather/"], 30, "/weather/sun", {"resync": "400ms", "publish_timeout": "600ms"})),
    eb("lossy-bus", "lossy", "bus", EB_SERVER),
    eb("partition-cut", "partition-heal", "cut",
       eb_client(["/x/"], 35, "/x/1", {"resync": "400ms", "sync_timeout": "400ms", "publish_timeout": "500ms"})),
    eb("partition-bus", "partition-heal", "bus", EB_SERVER),
    eb("restart-bus", "server-restart", "bus", EB_SERVER),
    eb("restart-late", "server-restart", "late", eb_client(["/a/"])),
]


# ---- PPPP ---------------------------------------------------------------------------------------
def pp_times(idle: int, first_idle: int) -> tuple[str, str]:
    return (f"--idle-ms {idle} --first-idle-ms {first_idle} --dead-multiple 3",
            f"--set idle={idle}ms --set first_idle={first_idle}ms --set liveness=3")


def pp_publisher(count: int, rate: int, channels: str = "news,weather", idle: int = 200,
                 first_idle: int = 50) -> tuple[str, str]:
    """``count`` messages per channel at ``rate`` per second per channel, published by itself."""
    s, r = pp_times(idle, first_idle)
    return (f"{{python}} tests/standins/pppp_publisher.py --bind {{endpoint}} --channels {channels} --count {count} "
            f"--rate {rate} {s}",
            f"{{zmq_harness}} node pppp publisher --bind {{endpoint}} --data-dir {{data_dir}} --set channels={channels} "
            f"--set count={count} --set rate={rate} {r}")


def pp_subscriber(channels: str = "news,weather", idle: int = 200, first_idle: int = 50) -> tuple[str, str]:
    s, r = pp_times(idle, first_idle)
    return (f"{{python}} tests/standins/pppp_subscriber.py --connect {{connect}} --identity {{name}} "
            f"--channels {channels} {s}",
            f"{{zmq_harness}} node pppp subscriber --connect {{connect}} --identity {{name}} --data-dir {{data_dir}} "
            f"--set channels={channels} {r}")


pp = entries_of("pp", "pppp/chaos")


PPPP = [
    pp("fifty-pub", "fifty-subscribers", "publisher", pp_publisher(17, 10)),
    pp("late-pub", "late-join", "publisher", pp_publisher(84, 20)),
    pp("late-middle", "late-join", "middle", pp_subscriber("news")),
    pp("lossy-pub", "lossy", "publisher", pp_publisher(60, 20)),
    pp("lossy-subs", "lossy", "subs", pp_subscriber()),
    pp("partition-pub", "partition-heal", "publisher", pp_publisher(60, 15)),
    pp("partition-subs", "partition-heal", "subs", pp_subscriber()),
    pp("pubrestart-pub", "publisher-restart", "publisher", pp_publisher(68, 15)),
    pp("pubrestart-subs", "publisher-restart", "subs", pp_subscriber()),
    pp("restartlive-pub", "restart-live", "publisher", pp_publisher(40, 15, idle=500, first_idle=150)),
    pp("restartlive-subs", "restart-live", "subs", pp_subscriber(idle=500, first_idle=150)),
    pp("subrestart-subs", "subscriber-restart", "subs", pp_subscriber("news")),
    pp("subrestart-pub", "subscriber-restart", "publisher", pp_publisher(120, 30, channels="news")),
]


# ---- Dafka --------------------------------------------------------------------------------------
DF_STANDIN = "{python} tests/standins/dafka_node.py"
# '{towers}' quoted: its value has ';' between towers, which a shell (the -sh variants' sh -c
# script) reads as the end of the command; a command line split by the harness drops the quotes
DF_COMMON_S = "--dialect strict --towers '{towers}' --bind {bind} --advertise {advertise} --beacon-ms 200"
DF_COMMON_R = "--name {name} --set bind={bind} --set advertise={advertise} --set 'towers={towers}' --set beacon=200ms"


def df_producer(records: int, interval_ms: int, delay_ms: int = 1000) -> tuple[str, str]:
    """``records`` records on ``orders`` by itself, the first ``delay_ms`` after its start."""
    times = f"--records {records} --delay-ms {delay_ms} --interval-ms {interval_ms} --head-ms 200"
    return (f"{DF_STANDIN} producer {DF_COMMON_S} --topic orders {times}",
            f"{{zmq_harness}} node dafka producer {DF_COMMON_R} --set topic=orders --set records={records} "
            f"--set delay={delay_ms}ms --set interval={interval_ms}ms --set head=200ms")


def df_store(two_nodes: bool = False) -> tuple[str, str]:
    where = "--two-nodes" if two_nodes else "--bind {bind} --advertise {advertise}"
    return (f"{DF_STANDIN} store --dialect strict --towers '{{towers}}' {where} --beacon-ms 200 --fetch-retry-ms 200 --data-dir {{data_dir}}",
            f"{{zmq_harness}} node dafka store {DF_COMMON_R} --data-dir {{data_dir}} --set fetch_retry=200ms")


def df_consumer(offset_reset: str = "earliest", peer_expiry_ms: int | None = None) -> tuple[str, str]:
    s = f"{DF_STANDIN} consumer {DF_COMMON_S} --topics orders --offset-reset {offset_reset} --fetch-retry-ms 200"
    r = (f"{{zmq_harness}} node dafka consumer {DF_COMMON_R} --set topics=orders --set offset_reset={offset_reset} "
         "--set fetch_retry=200ms")
    if peer_expiry_ms is not None:
        s += f" --peer-expiry-ms {peer_expiry_ms}"
        r += f" --set peer_expiry={peer_expiry_ms}ms"
    return s, r


DI = "{python} tests/standins/dafka_independent.py"
# its own habits where the document leaves them open: beacons every 250 ms (jittered), HEADs
# every 300 ms and after each RECORD, FETCH retries from 300 ms backing off, ACKs batched
DI_COMMON = "--dialect strict --towers '{towers}' --bind {bind} --advertise {advertise} --beacon-ms 250"


def di_producer(records: int, interval_ms: int, delay_ms: int = 1000) -> str:
    """The independent producer: as df_producer, and it exits 0 a second and a half after its
    last record (a producer with a count runs to completion)."""
    return (f"{DI} producer {DI_COMMON} --topic orders --records {records} --delay-ms {delay_ms} "
            f"--interval-ms {interval_ms} --head-ms 300 --linger-ms 1500")


def di_store() -> str:
    return f"{DI} store {DI_COMMON} --fetch-retry-ms 300 --data-dir {{data_dir}}"


def di_consumer(offset_reset: str = "earliest", peer_expiry_ms: int | None = None) -> str:
    expiry = "" if peer_expiry_ms is None else f" --peer-expiry-ms {peer_expiry_ms}"
    return f"{DI} consumer {DI_COMMON} --topics orders --offset-reset {offset_reset} --fetch-retry-ms 300{expiry}"


df = entries_of("df", "dafka/chaos", ready_line=True)  # (with ``towers=``, ``independent=`` where it has them)


DAFKA = [
    df("clean-producer", "clean", "producer", df_producer(60, 50), independent=di_producer(60, 50)),
    df("clean-store", "clean", "store", df_store(), independent=di_store()),
    df("clean-early", "clean", "early", df_consumer(), independent=di_consumer()),
    df("clean-late", "clean", "late", df_consumer("latest"), independent=di_consumer("latest")),
    df("lossy-producer", "lossy", "producer", df_producer(75, 40), independent=di_producer(75, 40)),
    df("lossy-consumers", "lossy", "consumers", df_consumer(), independent=di_consumer()),
    df("multi-producers", "multi-producer", "producers", df_producer(52, 67), independent=di_producer(52, 67)),
    df("multi-store", "multi-producer", "store", df_store(), independent=di_store()),
    df("partition-cut", "partition-heal", "cut", df_consumer(peer_expiry_ms=0),
       independent=di_consumer(peer_expiry_ms=0)),
    df("partition-store", "partition-heal", "store", df_store(), independent=di_store()),
    df("dies-producer", "producer-dies", "producer", df_producer(40, 50), independent=di_producer(40, 50)),
    df("dies-late", "producer-dies", "late", df_consumer(), independent=di_consumer()),
    df("storerestart-store", "store-restart", "store", df_store(), independent=di_store()),
    df("storerestart-store2n", "store-restart", "store", df_store(two_nodes=True)),
    df("twotowers-stores", "two-stores-two-towers", "stores", df_store(), independent=di_store()),
    df("twotowers-towers", "two-stores-two-towers", "consumers", df_consumer(), towers="towers",
       independent=di_consumer()),
]

# ---- DCP ---------------------------------------------------------------------------------------
DCP_STANDIN = "{python} tests/standins/dcp_standin.py"


def dcp_broker(heartbeat_ms: int, liveness: int) -> tuple[str, str]:
    """The broker, with the file's heartbeat and liveness."""
    return (f"{DCP_STANDIN} broker --bind {{endpoint}} --heartbeat-ms {heartbeat_ms} --liveness {liveness}",
            f"{{zmq_harness}} node dcp broker --bind {{endpoint}} --set heartbeat={heartbeat_ms}ms "
            f"--set liveness={liveness}")


def dcp_worker(heartbeat_ms: int, liveness: int, behaviour: str, service_time_ms: int) -> tuple[str, str]:
    """A worker of service ``echo`` as the file's workers behave (the broker's heartbeat agreed)."""
    return (f"{DCP_STANDIN} worker --connect {{connect}} --service echo --behaviour {behaviour} "
            f"--service-time-ms {service_time_ms} --heartbeat-ms {heartbeat_ms} --liveness {liveness}",
            f"{{zmq_harness}} node dcp worker --connect {{connect}} --identity {{name}} --set service=echo "
            f"--set behaviour={behaviour} --set service_time={service_time_ms}ms --set heartbeat={heartbeat_ms}ms "
            f"--set liveness={liveness}")


dc = entries_of("dc", "dcp")


DCP = [
    dc("clean-broker", "clean", "broker", dcp_broker(250, 3)),
    dc("clean-workers", "clean", "workers", dcp_worker(250, 3, "echo", 2)),
    dc("lossy-broker", "lossy", "broker", dcp_broker(100, 5)),
    dc("lossy-workers", "lossy", "workers", dcp_worker(100, 5, "echo", 2)),
    dc("workercrash-workers", "worker-crash", "workers", dcp_worker(200, 3, "echo", 20)),
    dc("brokerrestart-broker", "broker-restart", "broker", dcp_broker(200, 3)),
    dc("partition-broker", "partition-heal", "broker", dcp_broker(250, 3)),
]

ENTRIES = {e.id: e for e in EVENTBUS + PPPP + DAFKA + DCP}
DF_TOWER = "{zmq_harness} node dafka tower --name {name} --set bind_sub={bind_sub} --set bind_pub={bind_pub}"
DI_TOWER = f"{DI} tower --bind-sub {{bind_sub}} --bind-pub {{bind_pub}}"


def _names_group(nodes: Any, group: str) -> bool:
    names = nodes if isinstance(nodes, list) else [nodes]
    return any(n == group or fnmatch.fnmatch(group + ".0", n) or n.split(".")[0] == group for n in names)


VARIANTS = ("standin", "reference", "standin-sh", "independent", "independent-sh")


def command_of(entry: Entry, variant: str) -> str:
    """``standin-sh``: the stand-in started by a shell that waits a second first (two processes,
    a slow start; a process fault acts on both). ``independent``: Dafka's node written from the
    document alone (entries that have one)."""
    if variant.endswith("-sh"):
        return f"sh -c \"sleep 1; {command_of(entry, variant[:-3])}\""
    if variant.startswith("mutant:"):  # the reference node broken on purpose (--mutants)
        return f"{entry.reference} --mutant {variant.removeprefix('mutant:')}"
    if variant == "independent":
        if not entry.independent:
            raise ValueError(f"{entry.id} has no independent command")
        return entry.independent
    return entry.standin if variant == "standin" else entry.reference


def scenario_text(entry: Entry, variant: str) -> str:
    """The chaos file with ``entry.group`` run as the ``variant`` command (one of VARIANTS)."""
    doc = yaml.safe_load((ROOT / "scenarios" / entry.file).read_text())
    spec = doc["nodes"][entry.group]
    spec["command"] = command_of(entry, variant)
    spec["ready"] = dict(READY) if entry.ready_line else {"delay": "1500ms"}
    if entry.towers:
        tower = DI_TOWER if variant.startswith("independent") else DF_TOWER
        doc["nodes"][entry.towers].update(command=tower, ready=dict(READY))
    workload = [w for w in doc.get("workload", []) if not _names_group(w["nodes"], entry.group)]
    if workload:
        doc["workload"] = workload
    else:
        doc.pop("workload", None)
    doc["name"] = f"{doc['name']}-{entry.id}-{variant}"
    return yaml.safe_dump(doc, sort_keys=False)


def role_of(entry: Entry) -> tuple[str, str]:
    """(protocol, role) of the entry's external group."""
    doc = yaml.safe_load((ROOT / "scenarios" / entry.file).read_text())
    return entry.file.split("/")[0], doc["nodes"][entry.group]["role"]


def mutants_of(entry: Entry, pattern: str) -> list[str]:
    """The reference mutants of the entry's role whose names match ``pattern`` (a glob)."""
    import importlib  # noqa: PLC0415 - only the mutant sweep needs the reference nodes

    protocol, role = role_of(entry)
    table = importlib.import_module(f"reference_nodes.{protocol}.mutants").MUTANTS
    return [name for name, (r, _factory, _clause) in table.items() if r == role and fnmatch.fnmatch(name, pattern)]


def run_one(entry: Entry, variant: str, seed: int) -> dict[str, Any]:
    """One live run, in this process; its verdicts, failed ones in full."""
    from harness.composition import run_live  # noqa: PLC0415 - the child's import only
    from harness.scenario import parse_scenario  # noqa: PLC0415

    text = scenario_text(entry, variant)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="chaos-standins-") as out:
        result = run_live(parse_scenario(text, f"{entry.id}.yaml"), seed, out)
        kept = None
        if not result.ok:  # a failure that does not come back on a rerun is still explained by its trace
            kept = os.path.join(KEEP_DIR, f"{entry.id}-{variant}-seed-{seed}-{int(time.time())}")
            shutil.copytree(out, kept)
    return {"id": entry.id, "variant": variant, "seed": seed, "ok": result.ok, "kept": kept,
            "wall_s": round(time.monotonic() - start, 1),
            "failed": [{"check": v.check, "clause": v.clause, "level": v.level, "detail": v.detail[:1500]}
                       for v in result.failed],
            "passed": sorted(v.check for v in result.verdicts if v.ok),
            "details": {v.check: v.detail[:400] for v in result.verdicts if v.ok}}


def run_child(entry_id: str, variant: str, seed: int, timeout_s: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.chaos_standins", "--one", entry_id, variant, str(seed)]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"id": entry_id, "variant": variant, "seed": seed, "ok": False, "wall_s": timeout_s,
                "failed": [{"check": "sweep", "clause": "", "level": "", "detail": f"timed out after {timeout_s} s"}]}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"id": entry_id, "variant": variant, "seed": seed, "ok": False,
                "wall_s": round(time.monotonic() - start, 1),
                "failed": [{"check": "sweep", "clause": "", "level": "",
                            "detail": f"status {proc.returncode}: {proc.stderr[-1500:]}"}]}
    return json.loads(lines[-1])


def seeds_of(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-2")
    ap.add_argument("--only", default="", help="entries whose id starts with this (comma-separated prefixes)")
    ap.add_argument("--variant", choices=(*VARIANTS, "both"), default="both", help="both: standin and reference")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--out", help="append one JSON line per run here")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--mutants", metavar="GLOB", help="instead of the variants: each reference mutant of the "
                    "entry's role (matching GLOB) as the external command; a run that passes is a mutant not caught")
    ap.add_argument("--one", nargs=3, metavar=("ID", "VARIANT", "SEED"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(run_one(ENTRIES[a.one[0]], a.one[1], int(a.one[2]))), flush=True)
        return 0
    prefixes = [p for p in a.only.split(",") if p]
    entries = [e for e in ENTRIES.values() if (not prefixes or any(e.id.startswith(p) for p in prefixes))
               and (e.independent or not a.variant.startswith("independent"))]
    if a.list:
        print("\n".join(f"{e.id}: {e.file} {e.group}" for e in entries))
        return 0
    variants = ["standin", "reference"] if a.variant == "both" else [a.variant]
    runs = passed = 0
    for seed in seeds_of(a.seeds):
        for e in entries:
            if a.mutants:
                variants = [f"mutant:{m}" for m in mutants_of(e, a.mutants)]
            for variant in variants:
                r = run_child(e.id, variant, seed, a.timeout)
                runs, passed = runs + 1, passed + r["ok"]
                brief = "; ".join(f"{f['check']} [{f['clause']}]: {f['detail'][:160]}" for f in r["failed"])
                if r.get("kept"):
                    brief += f" (trace kept in {r['kept']})"
                print(f"{'PASS' if r['ok'] else 'FAIL'} {e.id} {variant} seed {seed} ({r['wall_s']} s) {brief}",
                      flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(json.dumps(r) + "\n")
    print(f"{passed}/{runs} runs passed", flush=True)
    return 0 if passed == runs else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main(sys.argv[1:]))
