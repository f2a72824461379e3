"""Log-spaced latency histograms and percentiles computed from them.

Spark only counts latencies per (group, bucket); the driver turns the small histogram into
percentiles. Buckets are DDSketch-style: bucket ``i`` holds values in (GAMMA**(i-1), GAMMA**i] and
is represented by ``2 * GAMMA**i / (GAMMA + 1)``, so any value in it is within a relative error of
``ALPHA = (GAMMA - 1) / (GAMMA + 1)`` (1%) of its representative. Spark also keeps the exact min
and max of every bucket; a representative is clamped into them, which can only make it closer.

Keys sort like the values they stand for: negative latencies (clocks that disagree, live) mirror
the positive buckets below ``NEG_BASE``, zero has its own key, positive values have key >= 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

ALPHA = 0.01  # relative accuracy of every percentile
GAMMA = (1 + ALPHA) / (1 - ALPHA)  # 1.0202...: bucket i covers (GAMMA**(i-1), GAMMA**i]
LOG_GAMMA = math.log(GAMMA)
ZERO_KEY = -1
NEG_BASE = -1_000_000  # key of a negative value -v: NEG_BASE - bucket(v)
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def bucket_key(value: int) -> int:
    """The bucket key of one latency in ns (the same formula as the Spark expression)."""
    if value > 0:
        return math.ceil(math.log(value) / LOG_GAMMA)
    if value == 0:
        return ZERO_KEY
    return NEG_BASE - math.ceil(math.log(-value) / LOG_GAMMA)


def representative(key: int) -> float:
    if key == ZERO_KEY:
        return 0.0
    if key <= NEG_BASE:
        return -2 * GAMMA ** (NEG_BASE - key) / (GAMMA + 1)
    return 2 * GAMMA ** key / (GAMMA + 1)


@dataclass
class Bucket:
    key: int
    count: int
    lo: int  # exact smallest value that fell in this bucket
    hi: int  # exact largest


class Histogram:
    """Mergeable counts per bucket for one group (a message type, a fault window, ...)."""

    def __init__(self) -> None:
        self.buckets: dict[int, Bucket] = {}
        self.total = 0.0  # sum of values, for the mean

    def add(self, key: int, count: int, lo: int, hi: int, total: float = 0.0) -> None:
        b = self.buckets.get(key)
        if b is None:
            self.buckets[key] = Bucket(key, count, lo, hi)
        else:
            b.count += count
            b.lo = min(b.lo, lo)
            b.hi = max(b.hi, hi)
        self.total += total

    def merge(self, other: "Histogram") -> None:
        for b in other.buckets.values():
            self.add(b.key, b.count, b.lo, b.hi)
        self.total += other.total

    @property
    def count(self) -> int:
        return sum(b.count for b in self.buckets.values())

    def quantile(self, q: float) -> float | None:
        """Nearest-rank quantile: the value of rank ceil(q * n) (1-based) in sorted order,
        within ALPHA relative error of the exact one."""
        n = self.count
        if n == 0:
            return None
        rank = max(1, math.ceil(q * n))
        seen = 0
        for key in sorted(self.buckets):
            b = self.buckets[key]
            seen += b.count
            if seen >= rank:
                return min(max(representative(key), b.lo), b.hi)
        raise AssertionError("rank beyond the histogram")  # pragma: no cover

    def summary(self) -> dict[str, float | int | None]:
        """count, p50, p90, p99, max, min, mean (ns); max/min/count are exact."""
        n = self.count
        out: dict[str, float | int | None] = {"count": n}
        for name, q in QUANTILES:
            v = self.quantile(q)
            out[name] = None if v is None else round(v)
        out["max"] = max((b.hi for b in self.buckets.values()), default=None)
        out["min"] = min((b.lo for b in self.buckets.values()), default=None)
        out["mean"] = round(self.total / n) if n else None
        return out

    def keys_counts(self) -> list[tuple[int, int]]:
        """(bucket key, count) in value order, for plotting."""
        return [(k, self.buckets[k].count) for k in sorted(self.buckets)]


def exact_quantile(values: Iterable[int], q: float) -> int:
    """Reference nearest-rank quantile (tests and the pyarrow baseline use the same definition)."""
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]
