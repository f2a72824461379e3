"""Helpers of the wire-conformance tests: a run of a small scenario with some nodes replaced,
its wire-conformance verdicts, and a node that rewrites what a reference node sends."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from harness.checkers.base import Verdict
from harness.composition import RunResult, run_sim
from harness.node import Action, Node, NodeContext, NodeFactory, Send
from harness.scenario import parse_scenario


def run(text: str, seed: int = 1, dialect: str | None = None, **by_role: NodeFactory) -> RunResult:
    """One seed of the scenario text (in ``dialect``), every node of a role given by keyword
    built by that factory instead of the reference."""
    if dialect is not None:
        text = f'dialect: "{dialect}"\n' + text
    scenario = parse_scenario(text, "test.yaml")
    factories = {n: by_role[g.role] for g in scenario.groups.values() if g.role in by_role for n in g.nodes}
    return run_sim(scenario, seed, factories=factories)


def explore_file(protocol: str) -> str:
    return Path(f"scenarios/{protocol}/explore/basic.yaml").read_text()


def wire(result: RunResult) -> list[Verdict]:
    out = [v for v in result.verdicts if v.check == "wire-conformance"]
    assert out, "every run judges the wire"
    return out


def broken(result: RunResult) -> dict[str, Verdict]:
    """The clauses wire-conformance found broken, with their verdicts."""
    return {v.clause: v for v in wire(result) if not v.ok}


class Rewriting:
    """A reference node whose sends of one message type are rewritten (a test-made mutant)."""

    def __init__(self, inner: Node, msg_type: str, rewrite: Callable[[list[bytes]], list[bytes]]) -> None:
        self.inner, self.msg_type, self.rewrite = inner, msg_type, rewrite
        self.protocol, self.role, self.name = inner.protocol, inner.role, inner.name

    def _out(self, actions: list[Action]) -> list[Action]:
        return [Send(a.socket, self.rewrite(list(a.frames)), a.msg_type, a.meta)
                if isinstance(a, Send) and a.msg_type == self.msg_type else a for a in actions]

    def sockets(self) -> Any:
        return self.inner.sockets()

    def start(self, now: int) -> list[Action]:
        return self._out(self.inner.start(now))

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        return self._out(self.inner.receive(socket, frames, now))

    def handle_timer(self, now: int) -> list[Action]:
        return self._out(self.inner.handle_timer(now))

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        return self._out(self.inner.command(request, now))

    def get_timer(self) -> int | None:
        return self.inner.get_timer()


def rewriting(factory: NodeFactory, msg_type: str, rewrite: Callable[[list[bytes]], list[bytes]]) -> NodeFactory:
    def build(ctx: NodeContext) -> Node:
        return Rewriting(factory(ctx), msg_type, rewrite)  # type: ignore[return-value]

    return build
