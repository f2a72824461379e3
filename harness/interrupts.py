"""SIGTERM and SIGINT as an exception in the main thread, so that a command stops what it runs,
reaps its processes, writes what it has and exits 128 + the signal's number with one line
instead of a traceback (CI time-outs, ``timeout`` and container stops send SIGTERM).

    with interruptible():        # the command's work; Interrupted is raised where it waits
        ...
        with shielded():         # clean-up (stop the runtime, reap, flush): a signal that
            ...                  # arrives here is held until the block ends

Ground floor: imports nothing of the project. Main thread only (as `signal.signal`).
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """A stop signal arrived. A BaseException, like KeyboardInterrupt, so that no ``except
    Exception`` of the harness takes it for an error of the run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum  # what a shell reports for a process killed by it: 130, 143


class _State:
    active = False  # inside interruptible()
    shield = 0  # depth of shielded() blocks
    pending: int | None = None  # a signal held by a shielded block
    raised = False  # Interrupted was raised once: later signals only wait for the clean-up


def _handler(signum: int, frame: FrameType | None) -> None:
    if _State.raised or _State.pending is not None:
        return  # already stopping: let the clean-up finish (it is bounded)
    if _State.shield:
        _State.pending = signum
        return
    _State.raised = True
    raise Interrupted(signum)


@contextmanager
def interruptible(signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block, the first of ``signals`` raises `Interrupted`; the handlers that were
    installed before come back afterwards."""
    previous = {s: signal.signal(s, _handler) for s in signals}
    _State.active, _State.shield, _State.pending, _State.raised = True, 0, None, False
    try:
        yield
    finally:
        _State.active = False
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def shielded() -> Iterator[None]:
    """Clean-up that a stop signal must not cut short: the signal is raised when the outermost
    shielded block ends (a no-op outside `interruptible`)."""
    _State.shield += 1
    try:
        yield
    finally:
        _State.shield -= 1
        if _State.shield == 0 and _State.pending is not None and _State.active:
            signum, _State.pending = _State.pending, None
            _State.raised = True
            raise Interrupted(signum)
