"""Fixtures for the live transport tests: real pyzmq sockets on 127.0.0.1, real subprocesses."""

from __future__ import annotations

from typing import Iterator

import pytest

from harness.live.runtime import LiveRuntime


@pytest.fixture
def runtime(no_thread_leak: None) -> Iterator[LiveRuntime]:
    rt = LiveRuntime(seed=7)
    try:
        yield rt
    finally:
        rt.stop()
