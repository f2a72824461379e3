"""A `DurableStore` kept in a file, for a reference node that runs as a process of its own
(`zmq-harness node ... --store PATH`): what it puts survives the process being killed and
started again, as a simulated node's store survives a simulated crash.

The file is an append-only log of MessagePack records (``[key, value]`` for a put, ``[key]``
for a delete), flushed after every write; loading replays it. A record cut short by a kill in
the middle of a write is ignored.
"""

from __future__ import annotations

import os
from typing import Any

import msgpack

from harness.node import DurableStore, NodeContext, NodeFactory


class FileStore(DurableStore):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        if os.path.exists(path):
            with open(path, "rb") as f:
                unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=False)
                try:
                    for record in unpacker:
                        if len(record) == 2:
                            self._data[record[0]] = record[1]
                        else:
                            self._data.pop(record[0], None)
                except (ValueError, msgpack.UnpackException):
                    pass  # a record cut short at the end: the write it belongs to never finished
        self._file = open(path, "ab")  # noqa: SIM115 - kept open for the life of the node
        self._pack = msgpack.Packer(use_bin_type=True).pack

    def put(self, key: str, value: Any) -> None:
        super().put(key, value)
        self._append([key, self._data[key]])

    def delete(self, key: str) -> None:
        super().delete(key)
        self._append([key])

    def _append(self, record: list[Any]) -> None:
        self._file.write(self._pack(record))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def with_store(factory: NodeFactory, store: DurableStore) -> NodeFactory:
    """The factory with ``store`` in place of the one the runtime hands it."""

    def build(ctx: NodeContext) -> Any:
        return factory(NodeContext(ctx.name, ctx.rng, store, ctx.config))

    return build
