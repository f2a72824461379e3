"""The codec's error types.

Decoding peer input raises exactly one error type, `DecodeError`, which names the protocol,
the dialect, the message, the field, the reason and the clause violated. `ConformanceError`
is the `DecodeError` raised in strict mode for bytes that only a deployed dialect allows.
"""

from __future__ import annotations

from typing import Any


class FieldError(Exception):
    """Raised by field types while (de)coding one value; the codec adds the context."""

    def __init__(self, reason: str, clause: str = "", field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.clause = clause
        self.field = field  # set when the type knows better than the caller; "" = whole message
        self.frame: int | None = None  # set when the raiser knows the frame index


class DecodeError(ValueError):
    """Bytes that are not a valid message of the protocol (in the given dialect)."""

    def __init__(
        self,
        protocol: str,
        dialect: str,
        message: str | None,
        field: str | None,
        reason: str,
        clause: str,
        *,
        frame: int | None = None,
        internal: bool = False,
    ) -> None:
        self.protocol = protocol
        self.dialect = dialect
        self.message = message
        self.field = field
        self.reason = reason
        self.clause = clause
        self.frame = frame
        self.internal = internal  # True only when the codec itself failed (a bug, never peer input)
        super().__init__(self._text())

    def _text(self) -> str:
        where = self.message or "(unidentified message)"
        if self.field:
            where += f".{self.field}"
        at = f" (frame {self.frame})" if self.frame is not None else ""
        return f"{self.protocol} [{self.dialect}] {where}{at}: {self.reason} [clause {self.clause}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "dialect": self.dialect,
            "message": self.message,
            "field": self.field,
            "frame": self.frame,
            "reason": self.reason,
            "clause": self.clause,
        }


class ConformanceError(DecodeError):
    """Strict decoding failed, but a deployed implementation's dialect accepts the bytes."""

    def __init__(self, strict_error: DecodeError, dialects: list[str], decoded: Any) -> None:
        self.strict_error = strict_error
        self.dialects = dialects
        self.decoded = decoded  # the Message as the first accepting dialect decodes it
        super().__init__(
            strict_error.protocol,
            strict_error.dialect,
            strict_error.message,
            strict_error.field,
            f"{strict_error.reason}; the bytes are valid only in dialect "
            f"{', '.join(dialects)} (as {decoded.name})",
            strict_error.clause,
            frame=strict_error.frame,
        )

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["only_in_dialects"] = list(self.dialects)
        return d


class EncodeError(ValueError):
    """Field values that cannot be encoded as the named message."""

    def __init__(self, protocol: str, dialect: str, message: str, field: str | None, reason: str) -> None:
        self.protocol, self.dialect, self.message, self.field, self.reason = (
            protocol, dialect, message, field, reason,
        )
        where = message + (f".{field}" if field else "")
        super().__init__(f"cannot encode {protocol} [{dialect}] {where}: {reason}")
