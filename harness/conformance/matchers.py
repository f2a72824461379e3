"""Field matchers of conformance cases (docs/conformance.md, "Matchers"): a plain value, or a
one-key mapping ``hex``, ``pattern``, ``any``, ``not``, ``len``, ``one_of``, ``nonempty``.
``ref`` and ``identity_of`` are resolved by the conductor before a value reaches `matches`.
The same matchers judge a message's fields (``expect``) and a line of the implementation's
output (``expect_output``)."""

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
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)) and len(expected) == len(actual):
        return all(equal(e, a) for e, a in zip(expected, actual))  # [[3, 3]] equals [SeqRange(3, 3)]
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
