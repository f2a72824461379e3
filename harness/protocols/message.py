"""The decoded message: what every decoder returns and what `Codec.encode` also accepts."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

# The two parts as a named tuple: ``name`` and ``fields`` are then read by C-level accessors,
# not Python properties (checkers read ``msg.name`` of every message several times).
_Parts = namedtuple("_Parts", ("name", "fields"))


class Message(_Parts):
    """A decoded (or to-be-encoded) message: its name and its field values.

    A tuple underneath so the generated decoders build it at C speed; ``msg["field"]`` reads
    a field, ``msg.name`` / ``msg.fields`` the parts.
    """

    __slots__ = ()

    name: str
    fields: dict[str, Any]

    def __getitem__(self, key: str) -> Any:  # type: ignore[override]
        return tuple.__getitem__(self, 1)[key]

    def get(self, key: str, default: Any = None) -> Any:
        return tuple.__getitem__(self, 1).get(key, default)

    def __repr__(self) -> str:
        return f"Message({self.name!r}, {self.fields!r})"


# The generated decoders call this with (Message, (name, fields)): no __new__ in between.
new_message = tuple.__new__
