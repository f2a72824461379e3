"""Fixtures shared by the test packages."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest


def _harness_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(("zmq-harness", "output-"))}


@pytest.fixture
def no_thread_leak() -> Iterator[None]:
    """Fails the test if it leaves a runtime loop or an output reader thread behind."""
    before = _harness_threads()
    yield
    deadline = time.monotonic() + 3.0
    while _harness_threads() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not (_harness_threads() - before), f"leaked threads: {_harness_threads() - before}"
