"""The message scan: latency histograms with one shuffle.

Rows: send/recv/drop and per-message `fault` rows (paired by msg_id), command/deliver rows
(paired by corr). Every row gets one long naming its message — xxhash64(run, pairing, id) — and a
window over that long gives each receipt the send time of its message, each delivery the time of
its command, and each send whether it was received, dropped or lost. Every receipt's latency goes
into a log-spaced bucket (reports.histogram) and Spark returns counts per
(scenario, message type, fault window, per-message fault, status, bucket): a few thousand rows,
however many million the traces hold.

Strings stay out of the shuffle: run, (protocol, scenario) and message type travel as xxhash64
longs, named on the driver from the control scan's dictionary.
"""

from __future__ import annotations

from typing import Any

from harness.trace import COMMAND, DELIVER, DROP, FAULT, RECV, SEND
from reports.histogram import LOG_GAMMA, NEG_BASE, ZERO_KEY
from reports.windows import Segment

FAULT_BITS = (("delay", 1), ("duplicate", 2), ("reorder", 4))
OTHER_FAULT_BIT = 8
RECEIVED, ORPHAN, DELIVERED, DROPPED, LOST, NO_ID = "received", "orphan", "delivered", "dropped", "lost", "no-id"
STATUSES = (RECEIVED, ORPHAN, DELIVERED, DROPPED, LOST, NO_ID)
STATUS = {name: i for i, name in enumerate(STATUSES)}  # small ints in Spark, names on the driver
SEND_SIDE, RECEIVE_SIDE, DROP_ROW, FAULT_ROW = 0, 1, 2, 3


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


def paired_rows(df):  # DataFrame -> DataFrame
    """One narrow row per message event: m (the message), side, time, hashes, fault bits."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    e2e = kind.isin(COMMAND, DELIVER)
    pair_id = F.when(e2e, F.when(F.col("corr").isNotNull(), F.xxhash64("corr"))).otherwise(F.col("msg_id"))
    return (
        df.filter(kind.isin(SEND, RECV, DROP, COMMAND, DELIVER) | ((kind == FAULT) & F.col("msg_id").isNotNull()))
        .select(
            F.xxhash64("run").alias("r"),
            e2e.alias("e"),
            pair_id.isNull().alias("u"),  # no id: cannot be paired, alone in its window
            F.coalesce(pair_id, F.monotonically_increasing_id()).alias("id"),
            F.when(kind.isin(SEND, COMMAND), SEND_SIDE).when(kind.isin(RECV, DELIVER), RECEIVE_SIDE)
            .when(kind == DROP, DROP_ROW).otherwise(FAULT_ROW).alias("k"),
            F.col("time_ns").alias("t"),
            F.xxhash64("msg_type").alias("mt"),
            F.xxhash64("protocol", "scenario").alias("p"),
            F.when(kind == FAULT, fault_bits(F.col("fault"))).otherwise(0).alias("f"),
        )
        # One long names the message: the sort behind the window orders on a single 8-byte
        # prefix (radix sort) instead of comparing four columns.
        .withColumn("m", F.xxhash64("r", "e", "u", "id"))
    )


def histogram_query(spark: Any, df, segments: list[Segment], labels: dict[str, int]):  # -> DataFrame
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    k, t = F.col("k"), F.col("t")
    w = Window.partitionBy("m")
    x = paired_rows(df).select(
        "r", "u", "e", "k", "t", "p", "mt",
        F.min(F.when(k == SEND_SIDE, t)).over(w).alias("t0"),
        F.max(F.when(k == SEND_SIDE, F.col("mt"))).over(w).alias("mt0"),
        F.bit_or("f").over(w).alias("fb"),
        F.count(F.when(k == RECEIVE_SIDE, 1)).over(w).alias("nr"),
        F.count(F.when(k == DROP_ROW, 1)).over(w).alias("nd"),
    ).filter(k <= RECEIVE_SIDE)
    u, t0 = F.col("u"), F.col("t0")
    status = (F.when(u, STATUS[NO_ID])
              .when(k == RECEIVE_SIDE, F.when(t0.isNull(), STATUS[ORPHAN]).otherwise(STATUS[RECEIVED]))
              .when(F.col("nr") > 0, STATUS[DELIVERED]).when(F.col("nd") > 0, STATUS[DROPPED])
              .otherwise(STATUS[LOST]))
    x = x.select(
        "r", "e", "p", "fb",
        F.coalesce(F.col("mt0"), F.col("mt")).alias("mt"),  # the type its send row names
        F.coalesce(t0, t).alias("ts"),  # the message's send time decides its fault window
        F.when((k == RECEIVE_SIDE) & ~u & t0.isNotNull(), t - t0).alias("lat"),
        status.alias("status"),
        F.when(k == SEND_SIDE, F.col("nd")).otherwise(0).alias("nd"),
    )
    if segments:
        schema = T.StructType([T.StructField("run", T.StringType()), T.StructField("s0", T.LongType()),
                               T.StructField("s1", T.LongType()), T.StructField("wl", T.IntegerType())])
        segs = spark.createDataFrame([(s.run, s.start, s.end, labels[s.label]) for s in segments], schema)
        segs = segs.select(F.xxhash64("run").alias("sr"), "s0", "s1", "wl")
        # a few segments per faulty run: broadcast, and let each row find the one it was sent in
        x = x.join(F.broadcast(segs), (x.r == segs.sr) & (x.ts >= segs.s0) & (x.ts < segs.s1), "left")
        wl = F.coalesce(F.col("wl"), F.lit(0))
    else:
        wl = F.lit(0)
    lat = F.col("lat")
    return (x.groupBy("p", "e", "mt", wl.alias("wl"), "fb", "status", bucket(lat).alias("b"))
            .agg(F.count(F.lit(1)).alias("n"), F.min(lat).alias("lo"), F.max(lat).alias("hi"),
                 F.sum(lat.cast("double")).alias("total"), F.sum("nd").alias("drops")))


def message_histogram(spark: Any, df, segments: list[Segment], labels: dict[str, int]) -> list[dict]:
    """Counts per (p, e2e, mt, window id, fault bits, status, bucket) with min/max/sum of latency."""
    return [{**r.asDict(), "status": STATUSES[r["status"]]}
            for r in histogram_query(spark, df, segments, labels).collect()]
