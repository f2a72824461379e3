"""Driving a reference node by hand in a test: its context, and picking actions out of what a
handler returned."""

from __future__ import annotations

import random
from typing import Any

from harness.node import DurableStore, Note, NodeContext, Send


def ctx(name: str = "n", store: DurableStore | None = None, seed: int = 0, **config: Any) -> NodeContext:
    return NodeContext(name, random.Random(seed), store if store is not None else DurableStore(), config)


def sends(actions, msg_type: str | None = None) -> list[Send]:
    return [a for a in actions if isinstance(a, Send) and (msg_type is None or a.msg_type == msg_type)]


def of(actions, kind) -> list:
    return [a for a in actions if isinstance(a, kind)]


def notes(actions, kind: str) -> list[Note]:
    return [a for a in actions if isinstance(a, Note) and a.kind == kind]
