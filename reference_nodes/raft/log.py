"""The Raft log of a reference peer, kept in the injected `DurableStore`.

Indexes start at 1. Entries up to ``snapshot_index`` are compacted into the snapshot (its last
included index and term are kept). Every change is written to the store before the method
returns, so a peer that answers after calling it has made its log durable first (Raft: persist
before responding). Entries are held as their wire bytes (``raw``, the `entry` frame) next to
their terms: AppendEntries and RequestEntries send the bytes as they are.

Store layout: ``log/<index>`` the entry's bytes, ``log/last`` the last index, ``snapshot``
``{"index", "term", "data"}``.
"""

from __future__ import annotations

from harness.node import DurableStore
from harness.protocols.raft import Entry, LogEntry

_ENTRY = Entry()


def entry_term(raw: bytes) -> int:
    """The term of an entry frame (7 bytes after the 12-byte reqid and the type byte)."""
    return int.from_bytes(raw[13:20], "little")


def entry_reqid(raw: bytes) -> bytes:
    return raw[:12]


class RaftLog:
    def __init__(self, store: DurableStore) -> None:
        self.store = store
        snap = store.get("snapshot") or {}
        self.snapshot_index: int = snap.get("index", 0)
        self.snapshot_term: int = snap.get("term", 0)
        self.snapshot_data: bytes = snap.get("data", b"")
        last = store.get("log/last", self.snapshot_index)
        self.raw: list[bytes] = []
        for i in range(self.snapshot_index + 1, last + 1):
            b = store.get(f"log/{i}")
            if b is None:  # a torn write cannot happen in the store; stop at a hole all the same
                break
            self.raw.append(b)
        self.terms: list[int] = [entry_term(b) for b in self.raw]

    # ---- reading -------------------------------------------------------------------------
    @property
    def first_index(self) -> int:
        return self.snapshot_index + 1

    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self.raw)

    @property
    def last_term(self) -> int:
        return self.terms[-1] if self.terms else self.snapshot_term

    def term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``; the snapshot's term at its last index; None when
        the index is compacted away or beyond the log."""
        if index == self.snapshot_index:
            return self.snapshot_term
        k = index - self.snapshot_index - 1
        if 0 <= k < len(self.terms):
            return self.terms[k]
        return None

    def raw_at(self, index: int) -> bytes:
        return self.raw[index - self.snapshot_index - 1]

    def entry(self, index: int) -> LogEntry:
        return _ENTRY.decode(self.raw_at(index))

    def slice(self, first: int, last: int) -> list[bytes]:
        """Entry frames ``first..last`` (inclusive), all within the log."""
        base = self.snapshot_index + 1
        return self.raw[first - base:last - base + 1]

    def first_index_of_term(self, index: int) -> int:
        """The first index of the run of entries that has the term of ``index`` (conflict hint)."""
        term = self.term_at(index)
        i = index
        while i - 1 > self.snapshot_index and self.term_at(i - 1) == term:
            i -= 1
        return i

    # ---- writing (durable before returning) ---------------------------------------------------
    def append(self, raws: list[bytes]) -> int:
        """Append entry frames; returns the new last index."""
        put = self.store.put
        i = self.last_index
        for b in raws:
            i += 1
            put(f"log/{i}", b)
            self.raw.append(b)
            self.terms.append(entry_term(b))
        put("log/last", i)
        return i

    def truncate_from(self, index: int) -> None:
        """Remove the entries at ``index`` and after."""
        last = self.last_index
        if index > last:
            return
        delete = self.store.delete
        for i in range(index, last + 1):
            delete(f"log/{i}")
        k = index - self.snapshot_index - 1
        del self.raw[k:]
        del self.terms[k:]
        self.store.put("log/last", self.last_index)

    def compact(self, index: int, data: bytes) -> None:
        """Replace the entries up to ``index`` (applied, hence committed) by a snapshot."""
        term = self.term_at(index)
        if term is None or index <= self.snapshot_index:
            return
        self._put_snapshot(index, term, data)
        k = index - self.snapshot_index
        delete = self.store.delete
        for i in range(self.snapshot_index + 1, index + 1):
            delete(f"log/{i}")
        del self.raw[:k]
        del self.terms[:k]
        self.snapshot_index, self.snapshot_term, self.snapshot_data = index, term, data

    def install_snapshot(self, index: int, term: int, data: bytes) -> None:
        """A snapshot from the leader: keep the entries after it if the log has its last entry
        (same index and term), else discard the whole log (Raft figure 13)."""
        keep = self.term_at(index) == term and index > self.snapshot_index
        delete = self.store.delete
        if keep:
            k = index - self.snapshot_index
            for i in range(self.snapshot_index + 1, index + 1):
                delete(f"log/{i}")
            del self.raw[:k]
            del self.terms[:k]
        else:
            for i in range(self.snapshot_index + 1, self.last_index + 1):
                delete(f"log/{i}")
            self.raw, self.terms = [], []
        self._put_snapshot(index, term, data)
        self.snapshot_index, self.snapshot_term, self.snapshot_data = index, term, data
        self.store.put("log/last", self.last_index)

    def _put_snapshot(self, index: int, term: int, data: bytes) -> None:
        self.store.put("snapshot", {"index": index, "term": term, "data": data})
