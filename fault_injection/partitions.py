"""Which node may send to which under the partitions in force: one table for the simulator's
network and the live proxy, so a partition cuts the same pairs in both.

A partition is a list of groups (node names or globs). Symmetric: a node in one group cannot
talk to a node that is only in another (a node in several groups bridges them); nodes in no
group are not affected. One-way (exactly two groups): only messages from groups[0] to
groups[1] are lost.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence

Matcher = Callable[[str], bool]


def is_glob(name: str) -> bool:
    return any(c in name for c in "*?[")


def matcher(pattern: str) -> Matcher:
    """A case-sensitive glob as a predicate (an exact name compares with ``==``)."""
    if not is_glob(pattern):
        return pattern.__eq__
    regex = re.compile(fnmatch.translate(pattern))
    return lambda s: regex.match(s) is not None


class PartitionTable:
    """Partitions by id, and the memoised answer to "is src -> dst cut now?"."""

    def __init__(self) -> None:
        self._next_id = 1
        # pid -> (groups as matchers, one_way, groups as given, for descriptions)
        self._partitions: dict[int, tuple[list[list[Matcher]], bool, tuple[tuple[str, ...], ...]]] = {}
        self._cut_cache: dict[tuple[str, str], bool] = {}
        self.partitioned = False  # fast check on the delivery path

    def add(self, groups: Sequence[Sequence[str]], one_way: bool = False, pid: int | None = None) -> int:
        """Start a partition; returns its id (``pid`` lets a caller that numbers partitions
        together with other faults choose it)."""
        if len(groups) < 2:
            raise ValueError(f"a partition needs at least two groups, got {list(groups)}")
        if one_way and len(groups) != 2:
            raise ValueError("a one-way partition takes exactly two groups: from, to")
        if pid is None:
            pid = self._next_id
        self._next_id = max(self._next_id, pid + 1)
        self._partitions[pid] = ([[matcher(n) for n in g] for g in groups], one_way,
                                 tuple(tuple(g) for g in groups))
        self._changed()
        return pid

    def heal(self, pid: int | None = None) -> list[int]:
        """Heal one partition (or all); returns the ids healed."""
        healed = list(self._partitions) if pid is None else ([pid] if pid in self._partitions else [])
        for p in healed:
            del self._partitions[p]
        self._changed()
        return healed

    def active(self) -> list[int]:
        return list(self._partitions)

    def groups(self, pid: int) -> tuple[tuple[str, ...], ...]:
        return self._partitions[pid][2]

    def one_way(self, pid: int) -> bool:
        return self._partitions[pid][1]

    def cut_by(self, pid: int, src: str, dst: str) -> bool:
        """Whether partition ``pid`` alone cuts src -> dst."""
        groups, one_way, _ = self._partitions[pid]
        return self.cuts(groups, one_way, src, dst)

    def _changed(self) -> None:
        self._cut_cache.clear()
        self.partitioned = bool(self._partitions)

    def is_cut(self, src: str, dst: str) -> bool:
        """True if messages from src to dst are lost under the current partitions."""
        if not self.partitioned:
            return False
        key = (src, dst)
        cut = self._cut_cache.get(key)
        if cut is None:
            cut = any(self.cuts(groups, one_way, src, dst) for groups, one_way, _ in self._partitions.values())
            self._cut_cache[key] = cut
        return cut

    def blocked(self, a: str, b: str) -> bool:
        """A connection handshake needs both directions."""
        return self.is_cut(a, b) or self.is_cut(b, a)

    @staticmethod
    def cuts(groups: list[list[Matcher]], one_way: bool, src: str, dst: str) -> bool:
        in_src = [any(m(src) for m in g) for g in groups]
        in_dst = [any(m(dst) for m in g) for g in groups]
        if one_way:
            return in_src[0] and in_dst[1]
        # Cut when both are in some group but no group holds both (a node in two groups bridges).
        return any(in_src) and any(in_dst) and not any(s and d for s, d in zip(in_src, in_dst, strict=True))
