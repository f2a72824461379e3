"""Fixtures shared by the test packages."""

from __future__ import annotations

import threading
import time
from pathlib import Path
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


RUNS = Path(__file__).resolve().parents[1] / "runs"


def _runs_listing() -> set[str]:
    return {p.name for p in RUNS.iterdir()} if RUNS.is_dir() else set()


@pytest.fixture(scope="session", autouse=True)
def checkout_runs_untouched() -> Iterator[None]:
    """Tests write to their tmp_path: a run left in the checkout's runs/ would turn up in the
    report of `./scripts/main` as a failure nobody ran (a replayed mutant did, once)."""
    before = _runs_listing()
    yield
    added = sorted(_runs_listing() - before)
    assert not added, f"tests wrote runs into {RUNS}: {added}"
