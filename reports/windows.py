"""Fault windows: the stretches of a run during which a fault was in force.

A window opens and closes on these trace rows (per run, in time order; at equal times in file
order):

| opens | closes | window label |
|---|---|---|
| `crash` row of node N | the next `restart` row of N | `crash:N` |
| `pause` row of node N | the next `resume` row of N | `pause:N` |
| `fault` row, node `nemesis`, fault `partition`, detail `p<id> ...` | `fault` row `heal` whose detail lists `p<id>` | `partition` |
| `fault` row, fault `slow-link`, detail `l<id> ...` | `fault` row `restore-link` with detail `l<id>` | `slow-link` |
| `fault` row, fault `clock` on node N, non-zero offset/drift | `clock` row of N with `offset=0ns drift=0.0` | `clock:N` |

A window still open at the end of the run lasts until the end. Other `fault` rows without a
`msg_id` (e.g. `incompatible-sockets`) are point events, counted but not windows; `fault` rows
with a `msg_id` are per-message faults (delay, duplicate, reorder) and label that message only.

Overlapping windows are cut into segments; a segment's label joins the labels in force with `+`
in sorted order (`crash:broker+partition`). A message belongs to the segment in force when it
was *sent* (`start <= send time < end`); outside every window its label is `none`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

NONE = "none"
END = 2**63 - 1  # "until the end of the run"


@dataclass(frozen=True)
class Event:
    """One control row of a run (kind crash/restart/pause/resume, or fault without msg_id)."""

    run: str
    time_ns: int
    order: int  # position in the trace, to break ties at equal times
    kind: str
    node: str | None
    fault: str | None
    detail: str | None


@dataclass(frozen=True)
class Segment:
    run: str
    start: int
    end: int  # exclusive; END when the window never closed
    label: str


def _transitions(e: Event) -> list[tuple[str, str, bool]]:
    """(key, label, opens) for one event; [] for a point event."""
    node = e.node or "?"
    if e.kind == "crash":
        return [(f"crash:{node}", f"crash:{node}", True)]
    if e.kind == "restart":
        return [(f"crash:{node}", f"crash:{node}", False)]
    if e.kind == "pause":
        return [(f"pause:{node}", f"pause:{node}", True)]
    if e.kind == "resume":
        return [(f"pause:{node}", f"pause:{node}", False)]
    if e.kind != "fault":
        return []
    words = (e.detail or "").split()
    if e.fault == "partition" and words:
        return [(f"partition:{words[0]}", "partition", True)]
    if e.fault == "heal":
        return [(f"partition:{w}", "partition", False) for w in words]
    if e.fault == "slow-link" and words:
        return [(f"slow-link:{words[0]}", "slow-link", True)]
    if e.fault == "restore-link":
        return [(f"slow-link:{w}", "slow-link", False) for w in words]
    if e.fault == "clock":
        cleared = "offset=0ns" in words and "drift=0.0" in words
        return [(f"clock:{node}", f"clock:{node}", not cleared)]
    return []


def is_point_event(e: Event) -> bool:
    return e.kind == "fault" and not _transitions(e)


def segments(events: Iterable[Event]) -> list[Segment]:
    """Cut every run's windows into labelled, non-overlapping segments."""
    by_run: dict[str, list[Event]] = {}
    for e in events:
        by_run.setdefault(e.run, []).append(e)
    out: list[Segment] = []
    for run, evs in by_run.items():
        evs.sort(key=lambda e: (e.time_ns, e.order))
        open_: dict[str, str] = {}  # key -> label
        start, label = None, NONE
        for e in evs:
            for key, lab, opens in _transitions(e):
                if opens:
                    open_[key] = lab
                else:
                    open_.pop(key, None)
            now = "+".join(sorted(set(open_.values()))) or NONE
            if now != label:
                if label != NONE and start is not None and e.time_ns > start:
                    out.append(Segment(run, start, e.time_ns, label))
                start, label = e.time_ns, now
        if label != NONE and start is not None:
            out.append(Segment(run, start, END, label))
    return out
