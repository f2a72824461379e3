"""Field matchers of conformance cases (docs/conformance.md, "Matchers"): a plain value, or a
one-key mapping ``hex``, ``pattern``, ``any``, ``not``, ``len``, ``one_of``, ``nonempty``, ``gt``,
``has`` (some element of a list matches: a matcher, or a mapping of the element's fields).
Matchers that take values from the run (``ref``, ``identity_of``, ``iut_address``,
placeholders) are resolved by the conductor before a value reaches `matches`.
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


MATCHER_NAMES = ("hex", "pattern", "any", "ref", "identity_of", "not", "len", "one_of", "nonempty", "gt",
                 "iut_address", "has")


def is_field_mapping(m: Any) -> bool:
    """``{has: {reqid: ..., type: ...}}``: a mapping of an element's fields, not a matcher."""
    return isinstance(m, dict) and bool(m) and not (len(m) == 1 and next(iter(m)) in MATCHER_NAMES)


def element_matches(m: Any, element: Any) -> bool:
    if not is_field_mapping(m):
        return matches(m, element)
    get = element.get if isinstance(element, dict) else lambda f: getattr(element, f, None)
    return all(matches(fm, get(f)) for f, fm in m.items())


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
        if k == "gt":
            return isinstance(actual, int) and isinstance(v, int) and actual > v
        if k == "has":  # one element of a repeated field (a Raft RequestEntries answer's entries)
            return isinstance(actual, (list, tuple)) and any(element_matches(v, x) for x in actual)
        if k == "ref":  # unresolved (nothing captured): never matches
            return False
    return equal(m, actual)
