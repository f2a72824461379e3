"""The simulator's event type and its counters.

One simpy event per message copy in flight, timer wake-up or scheduled call, carrying a plain
payload and a bound-method callback: no simpy process per message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import simpy
from simpy.events import Event


@dataclass
class SimStats:
    sent: int = 0  # Send actions carried out
    control: int = 0  # socket-internal messages (subscriptions, welcome)
    wire: int = 0  # message copies put on the network
    delivered: int = 0  # messages handed to a node's receive()
    dropped: dict[str, int] = field(default_factory=dict)  # by cause
    events: int = 0  # simulator events processed

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


def _run_call(event: Call) -> None:
    event.fn(event)


class Call(Event):
    """A simpy event that runs one callback with a payload: the lean alternative to a process
    per message. It is born triggered (``_ok``) and scheduled by ``Simulation._after``.
    ``Simulation.run`` calls ``fn`` straight away; under simpy's own ``step`` the class-level
    ``callbacks`` do the same."""

    # Class-level: every Call succeeds with no value and has the same one callback, so an
    # event costs three stores, not a list and five stores.
    _ok = True
    _value = None
    callbacks: Any = (_run_call,)  # a tuple: nothing may add to a list all events share

    def __init__(self, env: simpy.Environment, fn: Callable[[Call], None], payload: Any) -> None:
        self.env = env
        self.fn = fn
        self.payload = payload
