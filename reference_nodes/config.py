"""Checks of a reference node's config values, shared by every protocol: each error names the
protocol, the key and the value (`dcp config 'heartbeat_ms' must be ...`)."""

from __future__ import annotations

from typing import Any

from harness.node import NS_PER_MS
from harness.protocols import codec
from harness.protocols.codec import Codec


def ms_to_ns(protocol: str, value: Any, key: str) -> int:
    """Milliseconds (int or float, not negative) as nanoseconds."""
    try:
        ns = int(round(float(value) * NS_PER_MS))
    except (TypeError, ValueError):
        raise ValueError(f"{protocol} config {key!r} must be a number of milliseconds, not {value!r}") from None
    if ns < 0:
        raise ValueError(f"{protocol} config {key!r} must not be negative, got {value!r}")
    return ns


def positive_int(protocol: str, value: Any, key: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{protocol} config {key!r} must be an integer, not {value!r}") from None
    if n < 1:
        raise ValueError(f"{protocol} config {key!r} must be at least 1, got {value!r}")
    return n


def dialect_codec(protocol: str, config: dict[str, Any], dialects: tuple[str, ...]) -> tuple[str, Codec]:
    """The ``dialect`` a node was configured with (default strict) and its codec."""
    dialect = str(config.get("dialect", "strict"))
    if dialect not in dialects:
        raise ValueError(f"{protocol} config 'dialect' must be one of {dialects}, got {dialect!r}")
    return dialect, codec(protocol, dialect)
