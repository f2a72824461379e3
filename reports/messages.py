"""The message scan: latency histograms with one shuffle.

Rows: send/recv/drop and per-message `fault` rows (paired by msg_id), command/deliver rows
(paired by corr). Every row gets one long naming its message — xxhash64(run, pairing, id) — and a
window over that long gives each receipt the send time of its message, each delivery the time of
its command, and each send whether it was received, dropped or lost. Every receipt's latency goes
into a log-spaced bucket (reports.histogram) and Spark returns counts per
(scenario, message type, fault window, per-message fault, status, bucket): a few thousand rows,
however many million the traces hold.

Strings stay out of the shuffle: run, (protocol, scenario, clock) and message type travel as xxhash64
longs, named on the driver from the control scan's dictionary.
"""

from __future__ import annotations

from typing import Any

from harness.trace import COMMAND, DELIVER, DROP, FAULT, RECV, SEND
from reports.histogram import LOG_GAMMA, NEG_BASE, ZERO_KEY
from reports.windows import Segment

# Which clock a run's times are on: a simulated run is named "<scenario>/<seed>" and runs on
# virtual time; a live or conformance run's id carries "@<UTC start>-<hex>" (harness/run_ids.py)
# and its times are wall time. The report keeps the two apart.
VIRTUAL, WALL = "virtual", "wall"
WALL_CLOCK_MARK = "@"
FAULT_BITS = (("delay", 1), ("duplicate", 2), ("reorder", 4))
OTHER_FAULT_BIT = 8
RECEIVED, ORPHAN, DELIVERED, DROPPED, LOST, NO_ID = "received", "orphan", "delivered", "dropped", "lost", "no-id"
FANOUT = "fan-out"  # receipts beyond the first and last of one message: only the exact path times them
STATUSES = (RECEIVED, ORPHAN, DELIVERED, DROPPED, LOST, NO_ID, FANOUT)
STATUS = {name: i for i, name in enumerate(STATUSES)}  # small ints in Spark, names on the driver
SEND_SIDE, RECEIVE_SIDE, DROP_ROW, FAULT_ROW = 0, 1, 2, 3
# kind -> side (low 2 bits) + 4 for the end-to-end pairing (command/deliver by corr)
KIND_CODES = {SEND: SEND_SIDE, RECV: RECEIVE_SIDE, DROP: DROP_ROW, FAULT: FAULT_ROW,
              COMMAND: 4 + SEND_SIDE, DELIVER: 4 + RECEIVE_SIDE}


def clock_column():  # -> Column: run_scan.clock_of in Spark
    from pyspark.sql import functions as F

    return F.when(F.col("run").contains(WALL_CLOCK_MARK), F.lit(WALL)).otherwise(F.lit(VIRTUAL))


def bucket(lat):  # Column -> Column: reports.histogram.bucket_key, in Spark
    from pyspark.sql import functions as F

    pos = F.ceil(F.log(lat.cast("double")) / F.lit(LOG_GAMMA))
    neg = F.lit(NEG_BASE) - F.ceil(F.log((-lat).cast("double")) / F.lit(LOG_GAMMA))
    return F.when(lat > 0, pos).when(lat == 0, F.lit(ZERO_KEY)).otherwise(neg).cast("long")


def fault_bits(fault):  # Column -> Column: "delay:rule-1" -> 1, ...
    from pyspark.sql import functions as F

    expr = F.when(fault.isNull(), F.lit(0))
    for name, bit in FAULT_BITS:
        expr = expr.when(fault.startswith(name), F.lit(bit))
    return expr.otherwise(F.lit(OTHER_FAULT_BIT))


def paired_rows(df, spark: Any, segments: list[Segment], labels: dict[str, int]):  # -> DataFrame
    """One narrow row per message event, ready for the shuffle: m (names the message), t, flags
    (side, pairing, no-id, fault bits packed in one int), mt and p (type and scenario hashes) and
    wl, the fault window of a send row. UnsafeRow spends 8 bytes per field whatever its type, so
    fewer fields is a smaller shuffle."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    # One map lookup turns the kind into a code (side + 4 x pairing) instead of a string
    # comparison at every use.
    kind = F.col("kind")
    codes = F.create_map(*[F.lit(x) for kv in KIND_CODES.items() for x in kv])
    x = (df.filter(kind.isin(*KIND_CODES) & ((kind != FAULT) | F.col("msg_id").isNotNull()))
         .select("run", "time_ns", "msg_type", "msg_id", "corr", "fault", "protocol", "scenario",
                 F.element_at(codes, kind).alias("kc")))
    kc = F.col("kc")
    e2e = kc >= 4
    pair_id = F.when(e2e, F.when(F.col("corr").isNotNull(), F.xxhash64("corr"))).otherwise(F.col("msg_id"))
    x = x.select(
        F.xxhash64("run").alias("r"),
        e2e.cast("int").alias("e"),
        pair_id.isNull().cast("int").alias("u"),  # no id: cannot be paired, alone in its window
        F.coalesce(pair_id, F.monotonically_increasing_id()).alias("id"),
        kc.bitwiseAND(3).alias("k"),
        F.col("time_ns").alias("t"),
        F.xxhash64("msg_type").alias("mt"),
        F.xxhash64("protocol", "scenario", clock_column()).alias("p"),
        F.when(kc == FAULT_ROW, fault_bits(F.col("fault"))).otherwise(0).alias("f"),
    )
    if segments:
        # Label send rows with the segment they were sent in (a broadcast of a few rows per
        # faulty run); receipts get their send's label through the window.
        schema = T.StructType([T.StructField("run", T.StringType()), T.StructField("s0", T.LongType()),
                               T.StructField("s1", T.LongType()), T.StructField("wl", T.IntegerType())])
        segs = spark.createDataFrame([(s.run, s.start, s.end, labels[s.label]) for s in segments], schema)
        segs = segs.select(F.xxhash64("run").alias("sr"), "s0", "s1", "wl")
        x = x.join(F.broadcast(segs), (x.r == segs.sr) & (x.k == SEND_SIDE) & (x.t >= segs.s0) & (x.t < segs.s1),
                   "left")
        wl = F.coalesce(F.col("wl"), F.lit(0))
    else:
        wl = F.lit(0)
    # One long names the message: the sort behind the window orders on a single 8-byte prefix
    # (radix sort) instead of comparing four columns.
    return x.select(F.xxhash64("r", "e", "u", "id").alias("m"), "t", "mt", "p",
                    (F.col("k") + F.col("e") * 4 + F.col("u") * 8 + F.col("f") * 16).alias("flags"),
                    wl.alias("wl"))


def _histogram(x):  # DataFrame of (p, e, mt, wl, fb, status, lat, w, nd) -> the histogram DataFrame
    from pyspark.sql import functions as F

    lat = F.col("lat")
    return (x.groupBy("p", "e", "mt", "wl", "fb", "status", bucket(lat).alias("b"))
            .agg(F.sum("w").alias("n"), F.min(lat).alias("lo"), F.max(lat).alias("hi"),
                 F.sum(lat.cast("double")).alias("total"), F.sum("nd").alias("drops")))


def fast_query(spark: Any, df, segments: list[Segment], labels: dict[str, int]):  # -> DataFrame
    """Pairing by hash aggregation: a message's rows fold into one row (send time, first and last
    receipt, counts) — most of them already on the map side, since a message's rows sit together
    in its run's file — so the shuffle carries about one row per message. Exact for messages
    received at most twice; the receipts in between of a fan-out (3+ receipts) are only counted
    (status FANOUT), and message_histogram then takes the exact path."""
    from pyspark.sql import functions as F

    flags, t = F.col("flags"), F.col("t")
    k = flags.bitwiseAND(3)
    send, recv = k == SEND_SIDE, k == RECEIVE_SIDE
    m = paired_rows(df, spark, segments, labels).groupBy("m").agg(
        F.min(F.when(send, t)).alias("t0"),
        F.min(F.when(recv, t)).alias("t1"),
        F.max(F.when(recv, t)).alias("t2"),
        F.count(F.when(send, 1)).alias("ns"),
        F.count(F.when(recv, 1)).alias("nr"),
        F.count(F.when(k == DROP_ROW, 1)).alias("nd"),
        F.bit_or(F.shiftright(flags, 4)).alias("fb"),
        F.max(flags.bitwiseAND(12)).alias("eu"),
        F.coalesce(F.max(F.when(send, F.col("mt"))), F.max("mt")).alias("mt"),
        F.max("p").alias("p"),
        F.max(F.when(send, F.col("wl"))).alias("wl"),
    )
    t0, ns, nr, nd = F.col("t0"), F.col("ns"), F.col("nr"), F.col("nd")
    unpaired = F.col("eu").bitwiseAND(8) != 0

    def item(status: str, w, lat=None, drops=None):  # one histogram contribution, or null
        return F.struct(F.lit(STATUS[status]).alias("status"), w.cast("long").alias("w"),
                        (lat if lat is not None else F.lit(None).cast("long")).alias("lat"),
                        (drops if drops is not None else F.lit(0).cast("long")).alias("nd"))

    fate = (F.when(unpaired, F.when(ns + nr > 0, item(NO_ID, ns + nr)))  # not a lone drop/fault row
            .when(ns == 0, F.when(nr > 0, item(ORPHAN, nr)))
            .when(nr > 0, item(DELIVERED, ns, drops=nd * ns))
            .when(nd > 0, item(DROPPED, ns, drops=nd * ns))
            .otherwise(item(LOST, ns, drops=nd * ns)))
    paired = ~unpaired & (ns > 0)
    items = F.array(
        fate,
        F.when(paired & (nr > 0), item(RECEIVED, F.lit(1), F.col("t1") - t0)),
        F.when(paired & (nr > 1), item(RECEIVED, F.lit(1), F.col("t2") - t0)),
        F.when(paired & (nr > 2), item(FANOUT, nr - 2)),
    )
    x = m.select("p", (F.col("eu").bitwiseAND(4) != 0).alias("e"), "mt", F.coalesce(F.col("wl"), F.lit(0)).alias("wl"),
                 "fb", F.explode(items).alias("i"))
    return _histogram(x.filter(F.col("i").isNotNull()).select("p", "e", "mt", "wl", "fb", "i.status", "i.lat", "i.w",
                                                              "i.nd"))


def histogram_query(spark: Any, df, segments: list[Segment], labels: dict[str, int]):  # -> DataFrame
    """The exact path: a window over each message gives every receipt its send time, however many
    receipts a message has (PUB/SUB fan-out). Costlier than fast_query: the window pays per
    message."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    flags, t = F.col("flags"), F.col("t")
    k = flags.bitwiseAND(3)
    send = k == SEND_SIDE
    w = Window.partitionBy("m")
    x = paired_rows(df, spark, segments, labels).select(
        "t", "mt", "p", "flags",
        F.min(F.when(send, t)).over(w).alias("t0"),
        F.max(F.when(send, F.col("mt"))).over(w).alias("mt0"),
        F.max(F.when(send, F.col("wl"))).over(w).alias("wl"),
        F.bit_or(F.shiftright(flags, 4)).over(w).alias("fb"),
        F.count(F.when(k == RECEIVE_SIDE, 1)).over(w).alias("nr"),
        F.count(F.when(k == DROP_ROW, 1)).over(w).alias("nd"),
    ).filter(k <= RECEIVE_SIDE)
    u, t0 = flags.bitwiseAND(8) != 0, F.col("t0")
    status = (F.when(u, STATUS[NO_ID])
              .when(k == RECEIVE_SIDE, F.when(t0.isNull(), STATUS[ORPHAN]).otherwise(STATUS[RECEIVED]))
              .when(F.col("nr") > 0, STATUS[DELIVERED]).when(F.col("nd") > 0, STATUS[DROPPED])
              .otherwise(STATUS[LOST]))
    lat = F.when((k == RECEIVE_SIDE) & ~u & t0.isNotNull(), t - t0)
    x = x.select(
        "p", "fb", status.alias("status"), lat.alias("lat"), F.lit(1).cast("long").alias("w"),
        (flags.bitwiseAND(4) != 0).alias("e"),
        F.coalesce(F.col("mt0"), F.col("mt")).alias("mt"),  # the type its send row names
        F.coalesce(F.col("wl"), F.lit(0)).alias("wl"),  # the window it was sent in
        F.when(k == SEND_SIDE, F.col("nd")).otherwise(0).alias("nd"),
    )
    return _histogram(x)


def receiver_histogram(df) -> list[dict]:
    """End-to-end latency per receiver (reports.run_scan.RECEIVER_KEYS): every deliver row with a
    corr whose command is in its run, timed from the command's first row, counted per (protocol,
    scenario, clock, command type, node, delivery kind, topic, bucket). Command and deliver rows
    are few next to message rows: a plain join."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    x = df.filter(kind.isin(COMMAND, DELIVER) & F.col("corr").isNotNull()).select(
        "run", "kind", "time_ns", "msg_type", "corr", "node", "topic", "protocol", "scenario")
    commands = x.filter(kind == COMMAND).groupBy("run", "corr").agg(F.min("time_ns").alias("t0"),
                                                                   F.max("msg_type").alias("command"))
    lat = F.col("time_ns") - F.col("t0")
    rows = (x.filter(kind == DELIVER).join(commands, ["run", "corr"], "inner")
            .groupBy("protocol", "scenario", clock_column().alias("clock"), "command", "node",
                     F.col("msg_type").alias("delivery"), "topic", bucket(lat).alias("b"))
            .agg(F.count(F.lit(1)).alias("n"), F.min(lat).alias("lo"), F.max(lat).alias("hi"),
                 F.sum(lat.cast("double")).alias("total")))
    return [r.asDict() for r in rows.collect()]


def message_histogram(spark: Any, df, segments: list[Segment], labels: dict[str, int],
                      exact: bool = False) -> list[dict]:
    """Counts per (p, e2e, mt, window id, fault bits, status, bucket) with min/max/sum of latency:
    the fast path, or the exact path when a message had three receipts or more (or ``exact``)."""
    rows = None if exact else fast_query(spark, df, segments, labels).collect()
    if rows is None or any(r["status"] == STATUS[FANOUT] for r in rows):
        rows = histogram_query(spark, df, segments, labels).collect()
    return [{**r.asDict(), "status": STATUSES[r["status"]]} for r in rows]
