"""The simulated network between nodes: per-link latency, slow-link overrides and partitions.

Every directed pair of nodes (src, dst) is a ``Link`` with its own seeded generators, so adding
traffic on one link never changes the random draws of another. Links are created on first use
and kept in insertion order; slow-link overrides update them in place, so connections that
already hold a link see the change at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from fault_injection.partitions import PartitionTable
from fault_injection.partitions import is_glob as _is_glob
from fault_injection.partitions import matcher as _matcher
from fault_injection.rules import Distribution, DistSpec

DEFAULT_LATENCY: tuple[str, int, int] = ("uniform", 200_000, 800_000)


class LatencyModel:
    """Latency per directed link, in ns.

    ``links`` keys are (src, dst) node names or globs. A key covers both directions unless the
    reverse pair has its own entry; exact names win over globs, earlier globs over later ones,
    and ``default`` covers the rest. Values are anything ``Distribution.parse`` accepts:
    ``("uniform", lo, hi)``, ``("fixed", v)``, ``("normal", mean, sd)`` (clipped at 0),
    ``("exponential", mean)``, an int, or a string such as ``"uniform(200us, 800us)"``.
    """

    def __init__(self, default: DistSpec = DEFAULT_LATENCY,
                 links: Mapping[tuple[str, str], DistSpec] | None = None) -> None:
        self.default = Distribution.parse(default)
        self._exact: dict[tuple[str, str], Distribution] = {}
        self._globs: list[tuple[Callable[[str], bool], Callable[[str], bool], Distribution]] = []
        for (src, dst), spec in (links or {}).items():
            dist = Distribution.parse(spec)
            if _is_glob(src) or _is_glob(dst):
                self._globs.append((_matcher(src), _matcher(dst), dist))
            else:
                self._exact[(src, dst)] = dist

    def resolve(self, src: str, dst: str) -> Distribution:
        dist = self._exact.get((src, dst)) or self._exact.get((dst, src))
        if dist is not None:
            return dist
        for m_src, m_dst, d in self._globs:
            if (m_src(src) and m_dst(dst)) or (m_src(dst) and m_dst(src)):
                return d
        return self.default


class Link:
    """One direction between two nodes: its latency and its own generators."""

    __slots__ = ("src", "dst", "dist", "sample", "rng", "rule_rng")

    def __init__(self, src: str, dst: str, dist: Distribution, seed: int) -> None:
        self.src = src
        self.dst = dst
        self.dist = dist
        self.sample = dist.sample
        # String seeds are hashed with SHA-512 by random.Random: stable across processes.
        self.rng = random.Random(f"{seed}/latency/{src}>{dst}")
        self.rule_rng = random.Random(f"{seed}/rules/{src}>{dst}")

    def set_dist(self, dist: Distribution) -> None:
        self.dist = dist
        self.sample = dist.sample


class Network:
    """Links, slow-link overrides and partitions. Pure bookkeeping: the runtime asks it."""

    def __init__(self, seed: int, latency: LatencyModel) -> None:
        self.seed = seed
        self.latency = latency
        self._links: dict[tuple[str, str], Link] = {}
        self._slow: dict[int, tuple[Callable[[str], bool], Callable[[str], bool], Distribution]] = {}
        self._next_id = 1
        self._parts = PartitionTable()  # partition ids come from _next_id, shared with slow links
        self.partitioned = False  # fast check on the delivery path

    # -- latency --------------------------------------------------------------------------
    def link(self, src: str, dst: str) -> Link:
        link = self._links.get((src, dst))
        if link is None:
            link = Link(src, dst, self._dist_for(src, dst), self.seed)
            self._links[(src, dst)] = link
        return link

    def _dist_for(self, src: str, dst: str) -> Distribution:
        # The latest slow-link override that covers the link wins.
        for m_src, m_dst, dist in reversed(list(self._slow.values())):
            if m_src(src) and m_dst(dst):
                return dist
        return self.latency.resolve(src, dst)

    def slow(self, src: str, dst: str, latency: DistSpec) -> int:
        lid = self._next_id
        self._next_id += 1
        self._slow[lid] = (_matcher(src), _matcher(dst), Distribution.parse(latency))
        self._refresh()
        return lid

    def restore(self, lid: int) -> None:
        if self._slow.pop(lid, None) is not None:
            self._refresh()

    def _refresh(self) -> None:
        for (src, dst), link in self._links.items():
            link.set_dist(self._dist_for(src, dst))

    # -- partitions -----------------------------------------------------------------------
    def partition(self, groups: Sequence[Sequence[str]], one_way: bool) -> int:
        pid = self._parts.add(groups, one_way, self._next_id)
        self._next_id += 1
        self.partitioned = True
        return pid

    def heal(self, pid: int | None = None) -> list[int]:
        """Heal one partition (or all); returns the ids healed."""
        healed = self._parts.heal(pid)
        self.partitioned = self._parts.partitioned
        return healed

    def active_partitions(self) -> list[int]:
        return self._parts.active()

    def is_cut(self, src: str, dst: str) -> bool:
        """True if messages from src to dst are lost under the current partitions."""
        return self._parts.is_cut(src, dst)

    def blocked(self, a: str, b: str) -> bool:
        """A connection handshake needs both directions."""
        return self._parts.blocked(a, b)
