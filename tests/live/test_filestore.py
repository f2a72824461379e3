"""FileStore: a reference node's durable store in a file (`zmq-harness node ... --store`)."""

from __future__ import annotations

from pathlib import Path

from harness.live.filestore import FileStore, with_store
from harness.node import DurableStore
from tests.reference_nodes.node_helpers import ctx


def test_what_was_put_survives_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    s = FileStore(path)
    s.put("seq", 3)
    s.put("event/1", [1, "t", [b"\x00\xff"]])
    s.put("gone", 1)
    s.delete("gone")
    s.close()
    again = FileStore(path)
    assert again.snapshot() == {"seq": 3, "event/1": [1, "t", [b"\x00\xff"]]}


def test_a_record_cut_short_by_a_kill_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "s"
    s = FileStore(str(path))
    s.put("a", 1)
    s.put("b", "x" * 50)
    s.close()
    path.write_bytes(path.read_bytes()[:-10])  # the process died in the middle of the last write
    assert FileStore(str(path)).snapshot() == {"a": 1}


def test_with_store_hands_the_node_that_store(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path / "s"))
    seen: list[DurableStore] = []
    with_store(lambda c: seen.append(c.store), store)(ctx("n"))
    assert seen == [store]
