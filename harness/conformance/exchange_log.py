"""A conformance case's exchange, kept within bounds and with the messages a failure is about.

A case keeps every message it sends and receives as its evidence. An implementation that
floods the harness would make that list grow without end, so it is bounded — but not by
keeping the first messages only: a failure is about the messages just before it, and the
reason's "received: ..." names the last ones from the peer concerned. `ExchangeLog` keeps the
first ``head`` entries, the last ``tail`` entries, and in between the harness's own sends (the
case's script, up to ``sends``); what it drops is counted in one marker entry (``dir: gap``)
that says how many messages were not kept, and over which stretch of the case.
"""

from __future__ import annotations

from collections import deque
from itertools import chain
from typing import Any, Callable, Iterator

Entry = dict[str, Any]

HEAD, TAIL, SENDS = 300, 200, 500
GAP = "gap"  # the ``dir`` of the marker entry
ARROWS = {"out": "->", "in": "<-", GAP: ".."}  # how a printed exchange marks each direction


class ExchangeLog:
    def __init__(self, head: int = HEAD, tail: int = TAIL, sends: int = SENDS) -> None:
        self.head_max, self.sends_max = head, sends
        self.head: list[Entry] = []
        self.middle: list[Entry] = []  # the harness's sends that left the tail
        self.tail: deque[Entry] = deque(maxlen=tail)
        self.dropped = 0
        self.dropped_from: float | None = None  # t_ms of the first entry not kept
        self.dropped_to: float | None = None

    def append(self, entry: Entry) -> None:
        if len(self.head) < self.head_max:
            self.head.append(entry)
            return
        if len(self.tail) == self.tail.maxlen:
            self._leaves_tail(self.tail[0])
        self.tail.append(entry)

    def _leaves_tail(self, entry: Entry) -> None:
        if entry.get("dir") == "out" and len(self.middle) < self.sends_max:
            self.middle.append(entry)
            return
        self.dropped += 1
        if self.dropped_from is None:
            self.dropped_from = entry.get("t_ms")
        self.dropped_to = entry.get("t_ms")

    def __iter__(self) -> Iterator[Entry]:
        yield from self.head
        yield from self.middle
        yield from self.tail

    def __len__(self) -> int:
        return len(self.head) + len(self.middle) + len(self.tail)

    def last(self, n: int, keep: Callable[[Entry], bool]) -> list[Entry]:
        """The last ``n`` kept entries that ``keep`` accepts, oldest first."""
        found: list[Entry] = []
        for entry in chain(reversed(self.tail), reversed(self.middle), reversed(self.head)):
            if keep(entry):
                found.append(entry)
                if len(found) == n:
                    break
        return found[::-1]

    def entries(self) -> list[Entry]:
        """Everything kept, in time order, with a marker where messages were dropped."""
        if not self.dropped:
            return list(self)
        marker = {"t_ms": self.dropped_from, "dir": GAP, "peer": "", "message": "(not kept)",
                  "fields": {"messages": self.dropped, "from_ms": self.dropped_from, "to_ms": self.dropped_to,
                             "why": "the exchange keeps its first and last messages and the harness's sends"}}
        return [*self.head, marker, *self.middle, *self.tail]


__all__ = ["ARROWS", "ExchangeLog", "GAP"]
