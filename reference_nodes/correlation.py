"""Correlation ids carried in application payloads (Dafka records, PPPP messages).

A payload whose first bytes are CORR_TAG + id + "\\n" carries the correlation id of the
application request that produced it (the harness's workloads stamp their payloads so); the
receiving node's delivery names it, so the trace pairs the command with its deliveries (the
report's end-to-end latency and requests table)."""

from __future__ import annotations

CORR_TAG = b"corr:"


def tagged_content(corr: str, body: bytes) -> bytes:
    """``body`` with its start replaced by the correlation tag (its length kept when it is longer)."""
    tag = CORR_TAG + corr.encode() + b"\n"
    return tag + body[len(tag):]


def corr_of(content: bytes) -> str | None:
    """The correlation id a payload carries, or None."""
    if not content.startswith(CORR_TAG):
        return None
    end = content.find(b"\n", len(CORR_TAG))
    return None if end < 0 else content[len(CORR_TAG):end].decode("utf-8", "backslashreplace")
