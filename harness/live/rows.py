"""Small helpers that turn actions into trace columns (kept out of the runtime's hot loop)."""

from __future__ import annotations

import traceback
from typing import Any

DETAIL_MAX = 4000  # a detail column is evidence for a human, not a dump


def meta_columns(meta: dict[str, Any] | None) -> dict[str, Any]:
    """The trace columns a Send's ``meta`` (or a Deliver's data) can fill."""
    if not meta:
        return {}
    out: dict[str, Any] = {}
    topic = meta.get("topic")
    if topic is not None:
        out["topic"] = as_text(topic)
    for key in ("seq", "term", "index", "msg_id"):
        value = meta.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    corr = meta.get("corr")
    if corr is not None:
        out["corr"] = as_text(corr)
    return out


def as_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def exception_summary(exc: BaseException) -> str:
    """The exception and the innermost frames of its traceback, short enough for a row."""
    text = "".join(traceback.format_exception(exc, limit=-6)).strip()
    if len(text) > DETAIL_MAX:
        text = "..." + text[-(DETAIL_MAX - 3):]
    return text
