"""Capture a child process's stdout/stderr: reader threads, a bounded line buffer, log files."""

from __future__ import annotations

import threading
from collections import deque
from typing import IO, Callable

MAX_LINE = 65536  # a line longer than this is cut; a child printing no newlines can't eat memory


class OutputBuffer:
    """The last ``max_lines`` lines of a process's output, each tagged with its stream.

    Lines get a running number so a waiter can look only at lines it has not seen yet, even
    after older ones fell out of the buffer.
    """

    def __init__(self, max_lines: int = 2000) -> None:
        self._lines: deque[tuple[int, str, str]] = deque(maxlen=max_lines)
        self._count = 0
        self._open_streams = 0
        self.cond = threading.Condition()

    def add(self, stream: str, line: str) -> None:
        with self.cond:
            self._lines.append((self._count, stream, line))
            self._count += 1
            self.cond.notify_all()

    @property
    def count(self) -> int:
        return self._count

    def since(self, number: int) -> list[tuple[int, str, str]]:
        """Lines numbered >= ``number`` still in the buffer (call with ``cond`` held or not)."""
        with self.cond:
            return [item for item in self._lines if item[0] >= number]

    def lines(self, stream: str | None = None) -> list[str]:
        with self.cond:
            return [line for _, s, line in self._lines if stream is None or s == stream]

    def tail(self, n: int = 20) -> str:
        with self.cond:
            items = list(self._lines)[-n:]
        return "\n".join(f"[{s}] {line}" for _, s, line in items)

    @property
    def streams_open(self) -> bool:
        return self._open_streams > 0

    def stream_opened(self) -> None:
        with self.cond:
            self._open_streams += 1

    def stream_closed(self) -> None:
        with self.cond:
            self._open_streams -= 1
            self.cond.notify_all()


def start_reader(
    pipe: IO[bytes],
    stream: str,
    buffer: OutputBuffer,
    log: IO[str] | None = None,
    on_line: Callable[[str, str], None] | None = None,
) -> threading.Thread:
    """A daemon thread copying ``pipe`` line by line into ``buffer`` (and ``log``) until EOF."""
    buffer.stream_opened()
    thread = threading.Thread(
        target=_read, args=(pipe, stream, buffer, log, on_line), name=f"output-{stream}", daemon=True
    )
    thread.start()
    return thread


def _read(
    pipe: IO[bytes],
    stream: str,
    buffer: OutputBuffer,
    log: IO[str] | None,
    on_line: Callable[[str, str], None] | None,
) -> None:
    partial = b""
    skipping = False  # inside an over-long line whose head was already emitted
    try:
        read = getattr(pipe, "read1", pipe.read)
        while True:
            chunk = read(65536)
            if not chunk:
                break
            partial += chunk
            *complete, partial = partial.split(b"\n")
            if skipping and complete:
                complete.pop(0)  # the rest of the cut line
                skipping = False
            if skipping:
                partial = b""
            elif len(partial) > MAX_LINE:
                complete.append(partial[:MAX_LINE] + b" [line cut]")
                partial = b""
                skipping = True
            for raw in complete:
                _emit(raw, stream, buffer, log, on_line)
        if partial and not skipping:
            _emit(partial, stream, buffer, log, on_line)
    except (OSError, ValueError):
        pass  # pipe closed under us while the process is being torn down
    finally:
        try:
            pipe.close()
        except OSError:
            pass
        if log is not None:
            try:
                log.flush()
            except (OSError, ValueError):
                pass
        buffer.stream_closed()


def _emit(
    raw: bytes,
    stream: str,
    buffer: OutputBuffer,
    log: IO[str] | None,
    on_line: Callable[[str, str], None] | None,
) -> None:
    line = raw.decode("utf-8", "replace").rstrip("\r")
    buffer.add(stream, line)
    if log is not None:
        try:
            log.write(f"[{stream}] {line}\n")
        except (OSError, ValueError):
            pass
    if on_line is not None:
        on_line(stream, line)
