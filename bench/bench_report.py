"""The Spark report at scale: rows per second of the report job (`reports/`) on 1, 10 and 50
million trace rows (synthetic, with the real schema), next to a single-process pyarrow baseline
computing the same latency percentiles exactly (1M and 10M rows) and a naive Spark query (self
join + groupBy + percentile_approx, 1M and 10M rows), all measured in the same run. Every size runs
in a fresh process, so each figure includes what a user of `zmq-harness report` pays (a cold JVM)
and the peak RSS of the driver JVM and of the Python driver belong to that size alone.

    .venv/bin/python bench/bench_report.py [--sizes 1,10,50] [--no-record] [--keep DIR]

Generated data (about 18 MB per million rows) goes to a temporary directory that is deleted at
the end unless --keep DIR is given. Every step runs under a timeout.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, record  # noqa: E402
from harness.trace import DICTIONARY_COLUMNS, ROW_GROUP_ROWS, SCHEMA  # noqa: E402

STEP_TIMEOUT = 1800  # seconds, per measured step (one size in one process)
QUANTILES = (0.5, 0.9, 0.99)

# ---- synthetic traces ---------------------------------------------------------------------------

# (protocol, message types with their weight and median latency in µs, nodes as (name, role))
PROTOCOLS = {
    "dcp": ([("REQUEST", 30, 400), ("REPLY", 28, 450), ("PING", 8, 300), ("PONG", 8, 300),
             ("REGISTER", 1, 500), ("RECONNECT", 1, 500)],
            [("broker", "broker")] + [(f"workers.{i}", "worker") for i in range(4)]
            + [(f"clients.{i}", "client") for i in range(8)]),
    "raft": ([("AppendEntries", 40, 250), ("AppendEntriesReply", 38, 250), ("RequestVote", 2, 300),
              ("RequestVoteReply", 2, 300), ("ClientRequest", 9, 600), ("ClientResponse", 9, 650)],
             [(f"peers.{i}", "peer") for i in range(5)] + [(f"kv.{i}", "client") for i in range(3)]),
    "dafka": ([("RECORD", 50, 350), ("ACK", 20, 300), ("FETCH", 10, 500), ("HEAD", 15, 200),
               ("STORE-HELLO", 1, 800), ("CONSUMER-HELLO", 1, 800)],
              [(f"producers.{i}", "producer") for i in range(2)] + [(f"consumers.{i}", "consumer") for i in range(4)]
              + [("store", "store"), ("tower", "tower")]),
}
# Scenario flavours: which fault windows and per-message faults a run has.
FLAVOURS = ("clean", "lossy", "crash", "partition", "pause")
CHECKS = [("exactly-once", "{p}.client.retry"), ("no-node-errors", "no-node-errors"),
          ("one-request-per-worker", "{p}.broker.one-request-per-worker"),
          ("metadata-unchanged", "{p}.worker.metadata-copied"), ("liveness", "{p}.liveness")]
DURATION_NS = 10_000_000_000
ROWS_PER_RUN = 20_000


class _Rng:
    """Vectorised random numbers from pyarrow alone (no numpy): each draw gets its own stream."""

    def __init__(self, seed: int) -> None:
        self.seed = seed * 1000
        self.calls = 0

    def uniform(self, n: int) -> pa.Array:
        self.calls += 1
        return pc.random(n, initializer=self.seed + self.calls)

    def ints(self, n: int, lo: int, hi: int) -> pa.Array:
        """Uniform integers in [lo, hi)."""
        return pc.cast(pc.floor(pc.add(pc.multiply(self.uniform(n), hi - lo), lo)), pa.int64())

    def lognormal(self, n: int, sigma: float) -> pa.Array:
        """exp(sigma * z), z standard normal (Box-Muller)."""
        u1 = pc.subtract(1.0, self.uniform(n))  # (0, 1]: log is finite
        z = pc.multiply(pc.sqrt(pc.multiply(pc.ln(u1), -2.0)), pc.cos(pc.multiply(self.uniform(n), 2 * math.pi)))
        return pc.exp(pc.multiply(z, sigma))

    def weighted(self, n: int, weights: list[int]) -> pa.Array:
        """Indices drawn with the given integer weights."""
        slots = pa.array([i for i, w in enumerate(weights) for _ in range(w)], pa.int64())
        return pc.take(slots, self.ints(n, 0, len(slots)))


def _rows(n: int, **cols: object) -> pa.Table:
    """A block of ``n`` trace rows: arrays as given, scalars repeated, other columns null."""
    arrays = []
    for field in SCHEMA:
        v = cols.get(field.name)
        if v is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(v, (pa.Array, pa.ChunkedArray)):
            arrays.append(pc.cast(v, field.type))
        else:
            arrays.append(pa.array([v] * n, field.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def _sorted(a: pa.Array) -> pa.Array:
    return pc.take(a, pc.sort_indices(a))


def _window_mask(t: pa.Array, windows: list[tuple[str, int, int]]) -> pa.Array:
    mask = pc.less(t, -1)
    for _, a, b in windows:
        mask = pc.or_(mask, pc.and_(pc.greater_equal(t, a), pc.less(t, b)))
    return mask


def synth_run(index: int, rows: int = ROWS_PER_RUN) -> pa.Table:
    """One run's trace, sorted by time like a real one: send/recv pairs by msg_id (some dropped,
    duplicated or lost), command/deliver pairs by corr, fault windows, connects, notes, verdicts."""
    rng = _Rng(index)
    protocol = list(PROTOCOLS)[index % len(PROTOCOLS)]
    flavour = FLAVOURS[(index // len(PROTOCOLS)) % len(FLAVOURS)]
    seed = index // (len(PROTOCOLS) * len(FLAVOURS)) + 1
    scenario = f"{protocol}-{flavour}"
    types, nodes = PROTOCOLS[protocol]
    n_nodes = len(nodes)
    mutant = rng.uniform(1)[0].as_py() < 0.1
    names = pa.array([n for n, _ in nodes], pa.string())
    roles = pa.array([r for _, r in nodes], pa.string())
    impls = pa.array(["mutant:skip-heartbeat" if mutant and i == 0 else "reference" for i in range(n_nodes)])
    type_names = pa.array([t[0] for t in types], pa.string())
    frames_of = pa.array([b"\x92\xc4\x00\xc4" + t[0].encode() * 4 for t in types], pa.binary())
    run = f"{scenario}/{seed}"
    common = {"run": run, "seed": seed, "scenario": scenario, "protocol": protocol}

    def on(node_idx: pa.Array) -> dict[str, pa.Array]:
        return {"node": pc.take(names, node_idx), "role": pc.take(roles, node_idx),
                "implementation": pc.take(impls, node_idx),
                "socket": pc.if_else(pc.equal(node_idx, 0), "router", "dealer")}

    n_cmd = rows // 25
    n_msg = max(1, int((rows - 2 * n_cmd - 60) / 2.02))

    # fault windows (messages sent inside one are five times slower) and their control rows
    windows: list[tuple[str, int, int]] = []
    blocks: list[pa.Table] = []

    def control(node: int | str, kind: str, t: int, fault: str, detail: str | None) -> None:
        who = {"node": node, "role": "nemesis"} if isinstance(node, str) else \
            {"node": nodes[node][0], "role": nodes[node][1], "implementation": impls[node].as_py()}
        blocks.append(_rows(1, **common, **who, kind=kind, time_ns=t, fault=fault, detail=detail))

    if flavour == "crash":
        windows.append(("crash", 3_000_000_000, 5_000_000_000))
        control(0, "crash", 3_000_000_000, "crash", "incarnation 0")
        control(0, "restart", 5_000_000_000, "restart", "incarnation 1")
    elif flavour == "partition":
        windows.append(("partition", 4_000_000_000, 6_000_000_000))
        control("nemesis", "fault", 4_000_000_000, "partition", f"p1 [['{nodes[0][0]}'], ['{nodes[1][0]}']]")
        control("nemesis", "fault", 6_000_000_000, "heal", "p1")
    elif flavour == "pause":
        windows.append(("pause", 2_000_000_000, 2_500_000_000))
        control(1, "pause", 2_000_000_000, "pause", None)
        control(1, "resume", 2_500_000_000, "resume", "12 waiting")

    # messages: send at t, receive at t + latency
    mt = rng.weighted(n_msg, [t[1] for t in types])
    t_send = _sorted(rng.ints(n_msg, 0, DURATION_NS))  # msg_id follows send time, as in the simulator
    median_ns = pc.take(pa.array([t[2] * 1000.0 for t in types]), mt)
    lat = pc.multiply(median_ns, rng.lognormal(n_msg, 0.5))
    lat = pc.if_else(_window_mask(t_send, windows), pc.multiply(lat, 5.0), lat)
    fate = rng.uniform(n_msg)  # < .02 lost, < .05 dropped, < .07 duplicated, else one receive
    delayed = pc.less(rng.uniform(n_msg), 0.05 if flavour == "lossy" else 0.0)
    lat = pc.if_else(delayed, pc.add(lat, pc.cast(rng.ints(n_msg, 1_000_000, 20_000_000), pa.float64())), lat)
    t_recv = pc.add(t_send, pc.cast(pc.floor(lat), pa.int64()))
    src = rng.ints(n_msg, 0, n_nodes)
    dst = pc.add(src, rng.ints(n_msg, 1, n_nodes))  # anyone but the sender
    dst = pc.if_else(pc.greater_equal(dst, n_nodes), pc.subtract(dst, n_nodes), dst)
    msg = pa.table({"mt": mt, "t_send": t_send, "t_recv": t_recv, "src": src, "dst": dst,
                    "msg_id": pa.array(range(1, n_msg + 1), pa.int64()), "size": rng.ints(n_msg, 6, 200),
                    "fate": fate, "delayed": delayed})

    def messages(sel: pa.Array | None, kind: str, t: str, node: str, peer: str, **extra: object) -> None:
        m = msg if sel is None else msg.filter(sel)
        blocks.append(_rows(m.num_rows, **common, **on(m[node]), kind=kind, time_ns=m[t],
                            msg_type=pc.take(type_names, m["mt"]), peer=pc.take(names, m[peer]),
                            msg_id=m["msg_id"], size=m["size"], frames=pc.take(frames_of, m["mt"]), **extra))

    messages(None, "send", "t_send", "src", "dst")
    messages(pc.greater_equal(fate, 0.05), "recv", "t_recv", "dst", "src")
    dup = pc.and_(pc.greater_equal(fate, 0.05), pc.less(fate, 0.07))
    msg = msg.set_column(2, "t_recv", pc.add(t_recv, 50_000))
    messages(dup, "recv", "t_recv", "dst", "src")
    messages(pc.and_(pc.greater_equal(fate, 0.02), pc.less(fate, 0.05)), "drop", "t_send", "src", "dst",
             fault="drop:rule-2")
    messages(delayed, "fault", "t_send", "src", "dst", fault="delay:rule-1", detail="+5000000ns")
    messages(dup, "fault", "t_send", "src", "dst", fault="duplicate:rule-0", detail="1 extra")

    # application commands and their deliveries (end-to-end latency by corr)
    clients = [i for i, (_, role) in enumerate(nodes) if role in ("client", "producer")]
    c_node = pc.take(pa.array(clients, pa.int64()), rng.ints(n_cmd, 0, len(clients)))
    c_t = _sorted(rng.ints(n_cmd, 0, DURATION_NS - 1_000_000_000))
    e2e = pc.multiply(rng.lognormal(n_cmd, 0.6), 5_000_000.0)
    e2e = pc.cast(pc.floor(pc.if_else(_window_mask(c_t, windows), pc.multiply(e2e, 8.0), e2e)), pa.int64())
    corr = pc.binary_join_element_wise(pc.take(names, c_node), pc.cast(pa.array(range(n_cmd)), pa.string()), "-")
    # details as the simulator writes them: the request's repr, with its (incompressible) payload
    payload = pc.binary_join_element_wise(*[pc.cast(rng.uniform(n_cmd), pa.string()) for _ in range(3)], "")
    cmd_detail = pc.binary_join_element_wise("{'op': 'request', 'service': 'echo', 'data': [b'", payload,
                                             "'], 'id': '", corr, "'}", "")
    blocks.append(_rows(n_cmd, **common, **on(c_node), kind="command", time_ns=c_t, msg_type="request",
                        corr=corr, detail=cmd_detail))
    delivered = pc.greater_equal(rng.uniform(n_cmd), 0.005)
    d = pa.table({"n": c_node, "t": pc.add(c_t, e2e), "corr": corr, "payload": payload}).filter(delivered)
    blocks.append(_rows(d.num_rows, **common, **on(d["n"]), kind="deliver", time_ns=d["t"], msg_type="reply",
                        topic="echo", corr=d["corr"],
                        detail=pc.binary_join_element_wise("{'id': '", d["corr"], "', 'service': 'echo', 'data': [b'",
                                                           d["payload"], "'], 'metadata': [b'", d["corr"],
                                                           "'], 'attempts': 1}", "")))

    # connects, notes, verdicts
    idx = pa.array(range(1, n_nodes), pa.int64())
    blocks.append(_rows(n_nodes - 1, **common, **on(idx), kind="connect", time_ns=pc.multiply(idx, 1000),
                        peer=nodes[0][0], detail=f"tcp://{nodes[0][0]}:5000"))
    blocks.append(_rows(20, **common, **on(pa.array([0] * 20, pa.int64())), kind="note",
                        time_ns=rng.ints(20, 0, DURATION_NS), msg_type="worker-registered",
                        detail="{'worker': b'workers.0', 'service': 'echo'}"))
    fail = [u < (0.25 if mutant else 0.01) for u in rng.uniform(len(CHECKS)).to_pylist()]
    blocks.append(_rows(len(CHECKS), **common, implementation="", node="harness", role="harness", kind="verdict",
                        time_ns=DURATION_NS + 1_000_000_000, msg_type=pa.array([c for c, _ in CHECKS]),
                        verdict=pa.array(["fail" if f else "pass" for f in fail]),
                        clause=pa.array([cl.format(p=protocol) for _, cl in CHECKS]),
                        detail=pa.array([f"{c}: {'FAILED' if f else 'held'}" for (c, _), f in zip(CHECKS, fail)])))
    table = pa.concat_tables(blocks)
    return table.take(pc.sort_indices(table["time_ns"]))


def _write_runs(args: tuple[str, int, int, int]) -> int:
    out, first, count, rows_per_run = args
    written = 0
    for i in range(first, first + count):
        t = synth_run(i, rows_per_run)
        # written as harness.trace.TraceWriter writes (snappy, the same dictionary columns, row groups)
        pq.write_table(t, os.path.join(out, f"run-{i:06d}.parquet"), row_group_size=ROW_GROUP_ROWS, compression="snappy",
                       use_dictionary=DICTIONARY_COLUMNS)
        written += t.num_rows
    return written


def generate(out: str, rows: int, rows_per_run: int = ROWS_PER_RUN, workers: int = 2) -> int:
    """Write about ``rows`` trace rows as one Parquet file per run; returns the exact count.
    Each worker holds one run at a time, so memory does not grow with ``rows``."""
    os.makedirs(out, exist_ok=True)
    runs = max(1, math.ceil(rows / rows_per_run))
    chunk = 20
    jobs = [(out, i, min(chunk, runs - i), rows_per_run) for i in range(0, runs, chunk)]
    if workers <= 1:
        return sum(map(_write_runs, jobs))
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return sum(pool.imap_unordered(_write_runs, jobs))


# ---- measurements (each in its own process) ----------------------------------------------------


def _peak_rss_mb(pid: int | str = "self") -> float:
    """VmHWM: the peak resident set of a process so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _spark_python() -> list[int]:
    """Pids of the Spark Python daemon and its workers (where the arrow engine's tasks run)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if b"pyspark.daemon" in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def _python_cpu_s() -> float:
    """CPU of the Spark Python processes, with their exited children (workers that ended)."""
    total = 0.0
    for pid in _spark_python():
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def child_spark(path: str, naive: bool) -> dict:
    """The report job twice (cold JVM, then warm), then optionally the SQL engine (warm) and the
    naive query."""
    from pyspark.sql import functions as F

    from reports.cli import build_report
    from reports.job import read_traces
    from reports.session import get_session

    t0 = time.perf_counter()
    spark = get_session()
    jvm = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    out: dict = {"session_s": time.perf_counter() - t0}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("cold", "warm"):
            c0, p0, t0 = _cpu_s(jvm), _python_cpu_s(), time.perf_counter()
            report = build_report(path, os.path.join(tmp, name), spark=spark)
            out[f"{name}_s"], out[f"{name}_cpu_s"] = time.perf_counter() - t0, _cpu_s(jvm) - c0
            out[f"{name}_py_cpu_s"] = _python_cpu_s() - p0
        out["engine"] = report["spark"]["engine"]
        out["jvm_rss_mb"], out["py_rss_mb"] = _peak_rss_mb(jvm), _peak_rss_mb()
        out["worker_rss_mb"] = max((_peak_rss_mb(p) for p in _spark_python()), default=float("nan"))
        if naive:  # the SQL engine on the same data (its first run: its query plans are not yet compiled)
            t0 = time.perf_counter()
            sql = build_report(path, os.path.join(tmp, "sql"), spark=spark, engine="sql")
            out["sql_s"] = time.perf_counter() - t0
            assert sql["latency"]["by_msg_type"] == report["latency"]["by_msg_type"], "the engines disagree"
    out["by_msg_type"] = {f"{r['protocol']}/{r['msg_type']}": [r["count"], r["p50"], r["p90"], r["p99"], r["max"]]
                          for r in report["latency"]["by_msg_type"]}
    if naive:
        df = read_traces(spark, path)
        sends = df.filter(F.col("kind") == "send").select("run", "msg_id", "protocol", "msg_type",
                                                          F.col("time_ns").alias("t0"))
        recvs = df.filter(F.col("kind") == "recv").select("run", "msg_id", F.col("time_ns").alias("t1"))
        lat = F.col("t1") - F.col("t0")
        q = (sends.join(recvs, ["run", "msg_id"]).groupBy("protocol", "msg_type")
             .agg(F.percentile_approx(lat, list(QUANTILES)).alias("p"), F.max(lat).alias("max"),
                  F.count(F.lit(1)).alias("n")))
        c0, t0 = _cpu_s(jvm), time.perf_counter()
        q.collect()
        out["naive_s"], out["naive_cpu_s"] = time.perf_counter() - t0, _cpu_s(jvm) - c0
    spark.stop()
    return out


def child_arrow(path: str) -> dict:
    """Single process, pyarrow compute: pair send/recv by (run, msg_id) with a hash join, then
    exact nearest-rank percentiles per (protocol, msg_type) from a sort."""
    t0 = time.perf_counter()
    cols = ["run", "protocol", "kind", "time_ns", "msg_type", "msg_id"]
    t = ds.dataset(path, format="parquet", schema=SCHEMA).to_table(
        columns=cols, filter=pc.field("kind").isin(["send", "recv"]) & pc.field("msg_id").is_valid())
    sends = t.filter(pc.equal(t["kind"], "send")).select(["run", "msg_id", "protocol", "msg_type", "time_ns"])
    recvs = t.filter(pc.equal(t["kind"], "recv")).select(["run", "msg_id", "time_ns"]) \
        .rename_columns(["run", "msg_id", "t1"])
    del t
    j = recvs.join(sends, ["run", "msg_id"], join_type="inner")
    j = pa.table({"g": pc.binary_join_element_wise(j["protocol"], j["msg_type"], "/"),
                  "lat": pc.subtract(j["t1"], j["time_ns"])})
    j = j.take(pc.sort_indices(j, sort_keys=[("g", "ascending"), ("lat", "ascending")]))
    groups = j.group_by("g").aggregate([("lat", "count")]).sort_by("g")
    result, start = {}, 0
    lat = j["lat"]
    for g, n in zip(groups["g"].to_pylist(), groups["lat_count"].to_pylist()):
        ranks = [start + max(1, math.ceil(q * n)) - 1 for q in QUANTILES]
        result[g] = [n, *(lat[i].as_py() for i in ranks), lat[start + n - 1].as_py()]
        start += n
    return {"s": time.perf_counter() - t0, "rss_mb": _peak_rss_mb(), "by_msg_type": result}


def _child(*args: str) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=STEP_TIMEOUT,
                       env={**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")})
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _link_subset(src: str, dst: str, files: int) -> None:
    """The first ``files`` runs of the big set, as hard links: no copy, same bytes."""
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src))[:files]:
        os.link(os.path.join(src, name), os.path.join(dst, name))


def _agree(spark: dict, arrow: dict) -> str:
    """Largest relative difference between the report's percentiles and the exact ones."""
    worst = 0.0
    for g, (n, *qs) in arrow.items():
        got = spark[g]
        assert got[0] == n, (g, got, n)
        for a, b in zip(got[1:], qs):
            worst = max(worst, abs(a - b) / max(abs(b), 1))
    return f"{worst:.2%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,50", help="millions of rows, comma separated")
    ap.add_argument("--baseline-max", type=float, default=10, help="largest size (M rows) for the baselines")
    ap.add_argument("--rows-per-run", type=int, default=ROWS_PER_RUN)
    ap.add_argument("--keep", help="generate into (and keep) this directory")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    sizes = [float(x) for x in args.sizes.split(",")]
    root = args.keep or tempfile.mkdtemp(prefix="bench-report-")
    try:
        t0 = time.perf_counter()
        full = os.path.join(root, "all")
        runs_needed = math.ceil(max(sizes) * 1e6 / args.rows_per_run)
        have = len(os.listdir(full)) if os.path.isdir(full) else 0
        if have < runs_needed:
            shutil.rmtree(full, ignore_errors=True)
            generate(full, int(max(sizes) * 1e6), args.rows_per_run)
        gen_s = time.perf_counter() - t0
        generated = f"generated in {gen_s:.0f} s" if have < runs_needed else f"reused from {root} (--keep)"
        print(f"{runs_needed} runs {generated}", file=sys.stderr)
        lines = ["| rows | files | report, cold JVM | rows/s | report, warm | rows/s | CPU s, warm: JVM + Python "
                 "workers | peak RSS: JVM / driver / Python worker | SQL engine, its first run in that JVM | pyarrow exact, 1 process "
                 "| naive Spark join + percentile_approx |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
        notes = []
        warm: list[tuple[int, float]] = []  # (rows, warm seconds): how time grows with rows
        for size in sizes:
            files = math.ceil(size * 1e6 / args.rows_per_run)
            path = os.path.join(root, f"{size:g}M")
            if not os.path.isdir(path):
                _link_subset(full, path, files)
            rows = sum(pq.ParquetFile(os.path.join(path, f)).metadata.num_rows for f in os.listdir(path))
            base = size <= args.baseline_max
            print(f"{size:g}M: spark ...", file=sys.stderr)
            s = _child("spark", path, "naive" if base else "")
            arrow = naive = sql = "–"
            if base:
                print(f"{size:g}M: pyarrow ...", file=sys.stderr)
                a = _child("arrow", path)
                arrow = f"{a['s']:.1f} s, {rows / a['s'] / 1e6:.2f} M/s, {a['rss_mb']:,.0f} MB"
                naive = f"{s['naive_s']:.1f} s, {rows / s['naive_s'] / 1e6:.2f} M/s"
                sql = f"{s['sql_s']:.1f} s, {rows / s['sql_s'] / 1e6:.2f} M/s"
                notes.append(f"{size:g}M: report percentiles vs exact (pyarrow): largest relative difference "
                             f"{_agree(s['by_msg_type'], a['by_msg_type'])}")
            lines.append(f"| {rows:,} | {files} | {s['cold_s']:.1f} s | {rows / s['cold_s'] / 1e6:.2f} M | "
                         f"{s['warm_s']:.1f} s | {rows / s['warm_s'] / 1e6:.2f} M | "
                         f"{s['warm_cpu_s']:.1f} + {s['warm_py_cpu_s']:.1f} | "
                         f"{s['jvm_rss_mb']:,.0f} / {s['py_rss_mb']:,.0f} / {s['worker_rss_mb']:,.0f} MB | {sql} | "
                         f"{arrow} | {naive} |")
            print(lines[-1], file=sys.stderr)
            warm.append((rows, s["warm_s"]))
        for (r0, t0_), (r1, t1_) in zip(warm, warm[1:]):
            notes.append(f"rows x{r1 / r0:.1f} ({r0 / 1e6:.0f}M -> {r1 / 1e6:.0f}M): warm time x{t1_ / t0_:.2f}")
        body = "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + (
            f"\n- synthetic traces: {args.rows_per_run:,} rows per run and file (send/recv pairs with drops, "
            f"duplicates and delays; commands and deliveries; crash, partition and pause windows; 5 verdicts), "
            f"{generated}; Spark {_spark_version()} on local[*], the report's default session "
            f"(reports/session.py); the Spark session start (~5-10 s) is not included. 'report' is "
            f"`zmq-harness report` end to end (job, report.json, report.html) with its default engine "
            f"({s['engine']}); 'cold' is its first run in a fresh JVM, as `zmq-harness report` runs; 'warm' "
            f"repeats it in the same JVM. 'SQL engine' is the same report with `--engine sql`, run next in the "
            f"same JVM (its own first run), whose latency tables the run checks are equal to the arrow engine's.")
        print(body)
        if not args.no_record:
            record("Spark report: rows per second", body, command_line())
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, path = sys.argv[2], sys.argv[3]
        result = child_spark(path, len(sys.argv) > 4 and sys.argv[4] == "naive") if kind == "spark" \
            else child_arrow(path)
        print(json.dumps(result))
    else:
        main()
