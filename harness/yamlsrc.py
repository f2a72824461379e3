"""YAML loading that remembers where every value came from.

`load(path)` returns plain Python data plus a `Locations` map from a value's path (a tuple of
keys and indexes) to its line and column, so a validator can say "scenarios/x.yaml:12:
faults[1].crash: no node named 'workerz'".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


@dataclass(frozen=True)
class Where:
    line: int  # 1-based
    column: int  # 1-based


class SourceError(ValueError):
    """A problem in a source file, with its location and the path of the offending field."""

    def __init__(self, file: str, where: Where | None, path: tuple[Any, ...], message: str) -> None:
        self.file = file
        self.where = where
        self.path = path
        self.message = message
        loc = f"{file}:{where.line}" if where else file
        field = format_path(path)
        super().__init__(f"{loc}: {field + ': ' if field else ''}{message}")


def format_path(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


class Locations:
    def __init__(self, file: str) -> None:
        self.file = file
        self._at: dict[tuple[Any, ...], Where] = {}

    def set(self, path: tuple[Any, ...], node: yaml.Node) -> None:
        self._at[path] = Where(node.start_mark.line + 1, node.start_mark.column + 1)

    def of(self, path: tuple[Any, ...]) -> Where | None:
        # The closest recorded ancestor: a missing key is reported at its parent.
        p = tuple(path)
        while p not in self._at and p:
            p = p[:-1]
        return self._at.get(p)

    def error(self, path: tuple[Any, ...], message: str) -> SourceError:
        return SourceError(self.file, self.of(path), path, message)


def _convert(node: yaml.Node, path: tuple[Any, ...], locs: Locations) -> Any:
    locs.set(path, node)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for k_node, v_node in node.value:
            key = _convert(k_node, path + ("<key>",), locs)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise locs.error(path, f"mapping keys must be plain scalars, not {type(key).__name__}")
            if key in out:
                locs.set(path + (key,), k_node)
                raise locs.error(path + (key,), "duplicate key")
            out[key] = _convert(v_node, path + (key,), locs)
            # Point errors about a key at the key's own line.
            locs.set(path + (key,), k_node if isinstance(v_node, (yaml.MappingNode, yaml.SequenceNode)) else v_node)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(v, path + (i,), locs) for i, v in enumerate(node.value)]
    return _SCALARS.construct_object(node, deep=True)


# One loader instance only to resolve scalars (ints, bools, strings) with YAML's safe rules.
_SCALARS = yaml.SafeLoader("")


def loads(text: str, file: str = "<string>") -> tuple[Any, Locations]:
    locs = Locations(file)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = Where(mark.line + 1, mark.column + 1) if mark else None
        raise SourceError(file, where, (), f"not valid YAML: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise SourceError(file, None, (), f"not valid YAML: {e}") from None
    if node is None:
        raise SourceError(file, None, (), "the file is empty")
    return _convert(node, (), locs), locs


def load(path: str) -> tuple[Any, Locations]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SourceError(path, None, (), f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SourceError(path, None, (), f"not UTF-8 text (byte {e.start})") from None
    return loads(text, path)
