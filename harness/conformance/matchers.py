"""How an ``expect`` step's field matchers (docs/conformance.md, `harness.conformance.case`)
judge a decoded field. Matchers that take values from the run (``ref``, ``identity_of``,
``iut_address``, placeholders) are resolved by the conductor before they get here."""

from __future__ import annotations

import re
from typing import Any


def as_bytes(v: Any) -> Any:
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, dict) and set(v) == {"hex"}:
        return bytes.fromhex(str(v["hex"]).replace(" ", ""))
    if isinstance(v, list):
        return [as_bytes(x) for x in v]
    return v


def equal(expected: Any, actual: Any) -> bool:
    if expected == actual:
        return True
    if isinstance(actual, (bytes, list)):
        return as_bytes(expected) == actual
    return False


def matches(m: Any, actual: Any) -> bool:
    if isinstance(m, dict) and len(m) == 1:
        (k, v), = m.items()
        if k == "hex":
            return as_bytes(actual) == bytes.fromhex(str(v).replace(" ", ""))  # text fields too
        if k == "pattern":
            text = actual.decode("utf-8", "replace") if isinstance(actual, bytes) else str(actual)
            return re.fullmatch(str(v), text) is not None
        if k == "any":
            return actual is not None
        if k == "not":
            return not matches(v, actual)
        if k == "len":
            return actual is not None and len(actual) == int(v)
        if k == "one_of":
            return any(matches(x, actual) for x in v)
        if k == "nonempty":
            return bool(actual) == bool(v)
        if k == "ref":  # unresolved (nothing captured): never matches
            return False
    return equal(m, actual)
