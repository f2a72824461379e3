"""Durations, probabilities and latency distributions, as written in scenario files and on
command lines, shared by message rules, the nemesis, the simulator's latency model and the
proxy's slow links.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

# ---- durations ---------------------------------------------------------------------------------
#
# One rule: a duration written in a file or on a command line carries its unit ("250ms", "2s",
# "40us", "1.5s"); a bare number is refused (only 0 may go without one). Inside Python a
# duration is an int of nanoseconds: ``duration_ns`` takes those, and text through
# ``parse_duration``.

_UNITS: dict[str, int] = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*$")
DURATION_EXAMPLES = "250ms, 2s, 40us, 1.5s"


def parse_duration(value: str | int | float) -> int:
    """Nanoseconds from a duration as written in a file or on a command line: a number and a
    unit (``"250ms"``, ``"2s"``, ``"40us"``, ``"1.5s"``, ``"-50ms"``). A bare number is an error
    that says to give a unit — except 0, which means the same in every unit."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r} (use e.g. {DURATION_EXAMPLES})")
    if isinstance(value, (int, float)):
        if value == 0:
            return 0
        raise ValueError(_bare(value))
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        if m:
            number, unit = m.group(1), m.group(2)
            if unit is None:
                if float(number) == 0:
                    return 0
                raise ValueError(_bare(number))
            return int(round(float(number) * _UNITS[unit]))
    raise ValueError(f"not a duration: {value!r} (use e.g. {DURATION_EXAMPLES})")


def _bare(number: int | float | str) -> str:
    return f"the duration {number} has no unit; give a unit, e.g. {number}ms or {number}s"


def duration_ns(value: int | float | str) -> int:
    """For Python callers: an int (or float) is already nanoseconds; text goes through
    ``parse_duration`` and so needs its unit."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(round(value))
    return parse_duration(value)


def parse_probability(value: float | int | str) -> float:
    """A probability from 0.25, 1 or ``"25%"``."""
    if isinstance(value, str):
        text = value.strip()
        p = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        p = float(value)
    else:
        raise ValueError(f"not a probability: {value!r}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability {value!r} is outside [0, 1]")
    return p


# ---- distributions -------------------------------------------------------------------------------


class Distribution:
    """A seeded-sampling latency distribution over integer nanoseconds.

    Kinds: ``fixed(v)``, ``uniform(lo, hi)``, ``normal(mean, sd)`` clipped at 0,
    ``exponential(mean[, offset])``. ``sample(rng)`` always returns a non-negative int; the
    per-kind sampler is bound once at construction so sampling does not branch on the kind.
    """

    __slots__ = ("kind", "params", "sample")

    KINDS = ("fixed", "uniform", "normal", "exponential")

    def __init__(self, kind: str, *params: int | float) -> None:
        self.kind = kind
        self.params: tuple[int, ...] = tuple(int(round(p)) for p in params)
        self.sample: Callable[[random.Random], int]
        p = self.params
        if kind == "fixed":
            _arity(kind, p, 1, 1)
            value = max(0, p[0])
            self.sample = lambda rng: value
        elif kind == "uniform":
            _arity(kind, p, 2, 2)
            lo, hi = p
            if hi < lo or lo < 0:
                raise ValueError(f"uniform({lo}, {hi}): need 0 <= lo <= hi")
            span = hi - lo
            self.sample = lambda rng: lo + int(rng.random() * span)
        elif kind == "normal":
            _arity(kind, p, 2, 2)
            mean, sd = p
            if sd < 0:
                raise ValueError(f"normal({mean}, {sd}): sd must be >= 0")
            self.sample = lambda rng: max(0, int(rng.gauss(mean, sd)))
        elif kind == "exponential":
            _arity(kind, p, 1, 2)
            mean = p[0]
            offset = p[1] if len(p) > 1 else 0
            if mean <= 0 or offset < 0:
                raise ValueError(f"exponential({mean}, {offset}): need mean > 0, offset >= 0")
            rate = 1.0 / mean
            self.sample = lambda rng: offset + int(rng.expovariate(rate))
        else:
            raise ValueError(f"unknown distribution {kind!r}; use one of {', '.join(self.KINDS)}")

    @classmethod
    def parse(cls, spec: DistSpec) -> Distribution:
        """For Python callers: from a Distribution, an int (fixed ns), a duration string (fixed),
        a tuple ``("uniform", lo, hi)`` (ints are ns, strings need units) or a string
        ``"uniform(200us, 800us)"``. Values from files go through ``from_yaml``."""
        if isinstance(spec, Distribution):
            return spec
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return cls("fixed", spec)
        if isinstance(spec, (tuple, list)) and spec and isinstance(spec[0], str):
            return cls(spec[0], *(duration_ns(v) for v in spec[1:]))
        if isinstance(spec, str):
            m = re.match(r"^\s*([a-z]+)\s*\((.*)\)\s*$", spec)
            if m:
                args = [a for a in (x.strip() for x in m.group(2).split(",")) if a]
                return cls(m.group(1), *(parse_duration(a) for a in args))
            return cls("fixed", parse_duration(spec))
        raise ValueError(
            f"not a distribution: {spec!r} (use e.g. 500000, '2ms', ('uniform', lo, hi), "
            "'normal(1ms, 200us)', 'exponential(1ms)')"
        )

    @classmethod
    def from_yaml(cls, value: Any) -> Distribution:
        """A distribution as written in a file: ``2ms``, ``fixed(2ms)``, ``uniform(1ms, 5ms)``,
        ``normal(2ms, 500us)``, ``exponential(1ms)`` or ``[uniform, 1ms, 5ms]``; every duration in
        it carries its unit (a bare 0 is allowed)."""
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, list) and value and isinstance(value[0], str):
            return cls(value[0], *(parse_duration(v) for v in value[1:]))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls("fixed", parse_duration(value))
        raise ValueError(f"not a distribution: {value!r} (use e.g. 2ms, uniform(1ms, 5ms), normal(2ms, 500us), "
                         "exponential(1ms))")

    def high(self) -> int:
        """A bound almost every sample stays under (ns): the value of ``fixed``, the top of
        ``uniform``, five deviations above a normal mean, ten means past an exponential's offset
        (each exceeded less than once in 20,000 samples)."""
        p = self.params
        if self.kind == "fixed":
            return max(0, p[0])
        if self.kind == "uniform":
            return p[1]
        if self.kind == "normal":
            return max(0, p[0] + 5 * p[1])
        return (p[1] if len(p) > 1 else 0) + 10 * p[0]

    def mean(self) -> float:
        p = self.params
        if self.kind == "fixed":
            return float(p[0])
        if self.kind == "uniform":
            return (p[0] + p[1]) / 2.0
        if self.kind == "normal":
            return float(p[0])  # ignoring the clip at 0
        return float(p[0] + (p[1] if len(p) > 1 else 0))

    def __repr__(self) -> str:
        return f"{self.kind}({', '.join(str(v) for v in self.params)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Distribution) and (self.kind, self.params) == (other.kind, other.params)

    def __hash__(self) -> int:
        return hash((self.kind, self.params))


DistSpec = Distribution | int | float | str | tuple[Any, ...] | list[Any]


def _arity(kind: str, params: tuple[int, ...], lo: int, hi: int) -> None:
    if not lo <= len(params) <= hi:
        want = str(lo) if lo == hi else f"{lo}-{hi}"
        raise ValueError(f"{kind} takes {want} parameter(s), got {len(params)}: {params}")
