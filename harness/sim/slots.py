"""Per-node bookkeeping of the simulator: what survives a crash (name, factory, store, clock)
and what does not (the node object, its sockets, its timer, its backlog)."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from harness.node import DurableStore, Node, NodeFactory
from harness.runtime import NodeClock

if TYPE_CHECKING:
    from harness.sim.sockets import SimSocket


# Backlog tags (see NodeSlot.backlog): what waits while a node is paused.
MSG, TIMER, CMD, LOCAL = 0, 1, 2, 3


class NodeSlot(NodeClock):
    __slots__ = (
        "name", "factory", "role", "config", "implementation", "store", "start_at",
        "incarnation", "node", "running", "paused", "backlog", "sockets", "timer_gen",
        "timer_at", "fired_at", "fired_count", "wakes", "wake_gen", "offset", "drift", "skewed", "drain_pending",
        "notes",
    )

    def __init__(self, name: str, factory: NodeFactory, role: str, config: dict[str, Any],
                 implementation: str, start_at: int) -> None:
        self.name = name
        self.factory = factory
        self.role = role
        self.config = config
        self.implementation = implementation
        self.store = DurableStore()  # kept across crashes
        self.start_at = start_at
        self.incarnation = -1  # 0 after the first start
        self.node: Node | None = None
        self.running = False
        self.paused = False
        # Work that waits while the node is paused (and, after resume, until it has caught up):
        # tuples whose first item is one of the tags MSG, TIMER, CMD, LOCAL above.
        self.backlog: deque[tuple[Any, ...]] = deque()
        self.sockets: dict[str, SimSocket] = {}
        self.timer_gen = 0  # bumped when the deadline changes and by a crash: a waiting timer is stale
        self.timer_at: int | None = None  # what get_timer() last said, on the node's clock
        self.fired_at = -1  # virtual time of the last timer firing, and how often it fired then
        self.fired_count = 0
        # Virtual times of this incarnation's timer events in the queue, earliest first; the
        # earliest may be due before timer_at and then re-arms itself. A crash bumps wake_gen:
        # events of an older generation are ignored.
        self.wakes: list[int] = []
        self.wake_gen = 0
        self.offset = 0  # clock skew: node time = virtual + offset + drift * virtual
        self.drift = 0.0
        self.skewed = False
        self.drain_pending = False
        self.notes: dict[str, Any] = {}  # the latest Note data of each kind, this incarnation

