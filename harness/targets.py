"""Fault targets: what a fault in a scenario names, checked when the file loads and resolved
when the fault fires (so ``crash: leader`` hits whoever leads then).

A target is one of:

* a node (``workers.1``), a group (``workers``: all its nodes) or a role (``worker``);
* a glob over node names (``peers.*``);
* ``any`` / ``any:<set>``: the first node of the set (default: every node) that is running,
  in scenario order — "one of them, I do not care which";
* ``random`` / ``random:<set>``: a running node of the set drawn from the run's seed;
* a target the protocol defines (``leader`` for Raft, ``primary`` for the Event BUS), resolved
  by its package from what the nodes say (their ``Note``s) — see `harness.packages.base`.

A bare name is looked up in that order: node, group, role, protocol target. A target that
names nothing when its fault fires (no leader during an election, every node down) makes the
nemesis skip the fault with a trace row saying so.
"""

from __future__ import annotations

import fnmatch
import random
from typing import Callable

from fault_injection.rules import did_you_mean
from harness.packages.base import ProtocolPackage, TargetView

ANY, RANDOM = "any", "random"
GLOB_CHARS = "*?["


class Targets:
    """The targets of one scenario: its nodes, groups, roles and its protocol's own."""

    def __init__(self, groups: dict[str, list[str]], roles: dict[str, str], package: ProtocolPackage) -> None:
        self.groups = groups
        self.roles = roles  # node -> role, in scenario order
        self.package = package

    @property
    def nodes(self) -> list[str]:
        return list(self.roles)

    # ---- at load time ---------------------------------------------------------------------------
    def check(self, expr: str) -> None:
        """Raise ValueError (with a did-you-mean) unless ``expr`` is a target of this scenario."""
        if not isinstance(expr, str) or not expr:
            raise ValueError(f"expected a target, got {expr!r}")
        for prefix in (ANY, RANDOM):
            if expr == prefix:
                return
            if expr.startswith(prefix + ":"):
                self._set(expr[len(prefix) + 1:])
                return
        if self._static(expr) is None and expr not in self.package.targets:
            names = self.nodes + list(self.groups) + sorted(set(self.roles.values())) + list(self.package.targets)
            raise ValueError(f"no node, group, role or {self.package.name} target named {expr!r}"
                             f"{did_you_mean(expr, names)} (or use any, random, any:<group>, random:<group>"
                             f"{', ' + ', '.join(self.package.targets) if self.package.targets else ''})")

    def _set(self, expr: str) -> list[str]:
        nodes = self._static(expr)
        if nodes is None:
            raise ValueError(f"no node, group or role named {expr!r}"
                             f"{did_you_mean(expr, self.nodes + list(self.groups) + sorted(set(self.roles.values())))}")
        return nodes

    def static(self, expr: str) -> list[str] | None:
        """The nodes a node, group, role or glob names; None for a target known only when its
        fault fires (any, random, the protocol's own)."""
        return self._static(expr)

    def _static(self, expr: str) -> list[str] | None:
        """The nodes a node, group, role or glob names (None: it is none of these)."""
        if expr in self.roles:
            return [expr]
        if expr in self.groups:
            return list(self.groups[expr])
        by_role = [n for n, r in self.roles.items() if r == expr]
        if by_role:
            return by_role
        if any(c in expr for c in GLOB_CHARS):
            hits = [n for n in self.roles if fnmatch.fnmatchcase(n, expr)]
            return hits or None
        return None

    def overlap(self, sides: tuple[tuple[str, ...], ...]) -> list[str]:
        """Nodes that two sides of a partition name by node, group, role or glob (a mistake
        the file can be told about now; dynamic targets settle overlaps when the fault fires)."""
        seen: dict[str, int] = {}
        both: list[str] = []
        for i, side in enumerate(sides):
            for expr in side:
                for n in self._static(expr) or []:
                    if seen.setdefault(n, i) != i and n not in both:
                        both.append(n)
        return both

    # ---- when a fault fires -----------------------------------------------------------------------
    def resolver(self, view: TargetView, rng: random.Random) -> Callable[[str], list[str]]:
        """The function the nemesis calls with a target when a fault fires."""

        def resolve(expr: str) -> list[str]:
            for prefix in (ANY, RANDOM):
                if expr == prefix or expr.startswith(prefix + ":"):
                    pool = self._set(expr[len(prefix) + 1:]) if expr != prefix else self.nodes
                    running = [n for n in pool if view.is_running(n)]
                    if not running:
                        return []
                    return [running[0]] if prefix == ANY else [rng.choice(running)]
            nodes = self._static(expr)
            if nodes is not None:
                return nodes
            found = self.package.resolve(expr, view)
            return found or []

        return resolve


__all__ = ["ANY", "RANDOM", "Targets"]
