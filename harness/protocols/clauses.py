"""Clause catalogues: every normative statement of a protocol document, with a stable id.

A catalogue is a tuple of `Clause` records declared in `harness/protocols/<protocol>_clauses.py`.
Codec errors, checkers and conformance verdicts name clauses by id; `docs/clauses/<protocol>.md`
is generated from the catalogue by `render_markdown` (a test keeps the file current).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Level(str, Enum):
    """RFC 2119 level. SHALL/REQUIRED fold into MUST, RECOMMENDED into SHOULD, OPTIONAL into MAY."""

    MUST = "MUST"
    MUST_NOT = "MUST NOT"
    SHOULD = "SHOULD"
    SHOULD_NOT = "SHOULD NOT"
    MAY = "MAY"

    @property
    def severity(self) -> str:
        """Allure severity for a failed case of this level."""
        return {"MUST": "blocker", "MUST NOT": "blocker", "SHOULD": "normal", "SHOULD NOT": "normal"}.get(
            self.value, "minor"
        )

    @property
    def is_mandatory(self) -> bool:
        return self in (Level.MUST, Level.MUST_NOT)


class Observable(str, Enum):
    """Where a violation of the clause can be seen by a harness that is not inside the node."""

    WIRE = "wire"  # in the bytes of one message or the order/content of several
    TIMING = "timing"  # in when messages are (or are not) sent
    INTERNAL = "internal"  # only inside the node (storage, application delivery, memory)


# Short names for catalogue modules, which list many clauses.
MUST, MUST_NOT, SHOULD, SHOULD_NOT, MAY = Level.MUST, Level.MUST_NOT, Level.SHOULD, Level.SHOULD_NOT, Level.MAY
WIRE, TIMING, INTERNAL = Observable.WIRE, Observable.TIMING, Observable.INTERNAL

_ID = re.compile(r"^[a-z0-9]+(\.[a-z0-9][a-z0-9-]*)+$")


@dataclass(frozen=True)
class Clause:
    id: str  # "<protocol>.<area>.<short-name>", stable forever once published
    level: Level
    section: str  # heading of the document section the statement is in
    text: str  # the statement, quoted (trimmed) from the document
    observable: Observable
    roles: tuple[str, ...] = ()  # node roles the clause constrains; empty = all
    errata: str = ""  # id of the docs/errata.md entry that changes or settles this clause


class Catalogue:
    """The clauses of one protocol, indexed by id."""

    def __init__(self, protocol: str, document: str, clauses: tuple[Clause, ...]) -> None:
        self.protocol = protocol
        self.document = document
        self.clauses = clauses
        self._by_id: dict[str, Clause] = {}
        for c in clauses:
            if not _ID.match(c.id) or not c.id.startswith(protocol + "."):
                raise ValueError(f"clause id {c.id!r} must look like '{protocol}.area.name'")
            if c.id in self._by_id:
                raise ValueError(f"duplicate clause id {c.id!r}")
            self._by_id[c.id] = c

    def __getitem__(self, clause_id: str) -> Clause:
        return self._by_id[clause_id]

    def __contains__(self, clause_id: object) -> bool:
        return clause_id in self._by_id

    def __iter__(self):
        return iter(self.clauses)

    def __len__(self) -> int:
        return len(self.clauses)

    def render_markdown(self) -> str:
        """The generated reference page docs/clauses/<protocol>.md."""
        lines = [
            f"# {self.protocol} clause catalogue",
            "",
            f"Generated from `harness/protocols/{self.protocol}_clauses.py` (source document:"
            f" `{self.document}`). Do not edit by hand: run"
            " `zmq-harness clauses --write` after changing the catalogue.",
            "",
            f"{len(self.clauses)} clauses: "
            + ", ".join(
                f"{sum(1 for c in self.clauses if c.level is lv)} {lv.value}" for lv in Level
            )
            + ".",
            "",
            "| id | level | section | observable | roles | statement |",
            "|---|---|---|---|---|---|",
        ]
        for c in self.clauses:
            text = c.text.replace("|", "\\|").replace("\n", " ")
            if c.errata:
                text += f" (see errata {c.errata})"
            roles = ", ".join(c.roles) or "all"
            lines.append(
                f"| `{c.id}` | {c.level.value} | {c.section} | {c.observable.value} | {roles} | {text} |"
            )
        return "\n".join(lines) + "\n"
