"""Wire codecs, dialects and clause catalogues of the five protocols.

    from harness.protocols import codec
    dcp = codec("dcp")                      # strict: the document plus docs/errata.md
    frames = dcp.encode("PING")
    msg = dcp.decode(frames)                # Message("PING", {"version": 1})
    codec("dcp", "dcp:dagbox")              # a deployed implementation's dialect

Each protocol module (``harness/protocols/<name>.py``) declares ``TABLES`` (dialect -> Table);
its catalogue lives in ``<name>_clauses.py`` as ``CATALOGUE``.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from harness.protocols.clauses import Catalogue
from harness.protocols.codec import Codec, Message
from harness.protocols.errors import ConformanceError, DecodeError, EncodeError
from harness.protocols.table import Table

PROTOCOLS = ("dafka", "dcp", "eventbus", "pppp", "raft")

__all__ = [
    "PROTOCOLS", "Codec", "Message", "DecodeError", "ConformanceError", "EncodeError",
    "codec", "tables", "dialects", "catalogue",
]


def _check(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise KeyError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")


def tables(protocol: str) -> dict[str, Table]:
    _check(protocol)
    return importlib.import_module(f"harness.protocols.{protocol}").TABLES


def dialects(protocol: str) -> list[str]:
    return list(tables(protocol))


@lru_cache(maxsize=None)
def codec(protocol: str, dialect: str = "strict") -> Codec:
    """The (cached) codec of a protocol in a dialect. The strict codec reports bytes that only
    a dialect accepts as ConformanceError."""
    ts = tables(protocol)
    if dialect not in ts:
        raise KeyError(f"{protocol} has no dialect {dialect!r}; known: {', '.join(ts)}")
    c = Codec(ts[dialect])
    if dialect == "strict":
        c.alternatives = [codec(protocol, d) for d in ts if d != "strict"]
    return c


def catalogue(protocol: str) -> Catalogue:
    _check(protocol)
    return importlib.import_module(f"harness.protocols.{protocol}_clauses").CATALOGUE
