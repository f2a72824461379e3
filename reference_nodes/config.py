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


def flag(protocol: str, value: Any, key: str) -> bool:
    """A true/false setting (YAML's booleans; no truthy strings or numbers)."""
    if not isinstance(value, bool):
        raise ValueError(f"{protocol} config {key!r} must be true or false, not {value!r}")
    return value


def dialect_codec(protocol: str, config: dict[str, Any], dialects: tuple[str, ...]) -> tuple[str, Codec]:
    """The ``dialect`` a node was configured with (default strict) and its codec."""
    dialect = str(config.get("dialect", "strict"))
    if dialect not in dialects:
        raise ValueError(f"{protocol} config 'dialect' must be one of {dialects}, got {dialect!r}")
    return dialect, codec(protocol, dialect)


def as_bytes(value: Any, what: str) -> bytes:
    """Bytes as they are, text as UTF-8."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"{what} must be bytes or str, not {type(value).__name__}")


def endpoint(protocol: str, value: Any, key: str = "connect") -> str:
    """One endpoint (a one-item list is taken too)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    raise ValueError(f"{protocol} config {key!r} must be one endpoint string, not {value!r}")


def endpoints(protocol: str, value: Any, key: str = "bind") -> tuple[str, ...]:
    """An endpoint or a non-empty list of them."""
    if isinstance(value, str):
        value = [value]
    if not value or not isinstance(value, (list, tuple)) or not all(isinstance(b, str) for b in value):
        raise ValueError(f"{protocol} config {key!r} must be an endpoint or a list of them, got {value!r}")
    return tuple(value)


def identity(protocol: str, value: Any) -> bytes | None:
    """A routing identity: non-empty, not starting with a zero byte (ZeroMQ reserves those)."""
    if value is None:
        return None
    b = as_bytes(value, f"{protocol} config 'identity'")
    if not b or b[0] == 0:
        raise ValueError(f"{protocol} config 'identity' must be non-empty and not start with 0x00, got {b!r}")
    return b
