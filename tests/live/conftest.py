"""Fixtures for the live transport tests: real pyzmq sockets on 127.0.0.1, real subprocesses."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

from harness.live.runtime import LiveRuntime


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


@pytest.fixture
def runtime(no_thread_leak: None) -> Iterator[LiveRuntime]:
    rt = LiveRuntime(seed=7)
    try:
        yield rt
    finally:
        rt.stop()
