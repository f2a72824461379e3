"""Determinism is sacred: every shipped scenario, run twice with the same seed, writes a
byte-identical trace; another seed writes a different one."""

from __future__ import annotations

import glob
import hashlib
from pathlib import Path

import pytest

from harness.composition import run_sim
from harness.scenario import load_scenario

SHIPPED = sorted(p for p in glob.glob("scenarios/**/*.yaml", recursive=True) if "/conformance/" not in p)


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_scenarios_are_shipped() -> None:
    assert len(SHIPPED) >= 5


@pytest.mark.parametrize("path", SHIPPED)
def test_same_seed_same_bytes(path: str, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    a = run_sim(scenario, 11, str(tmp_path / "a"))
    b = run_sim(scenario, 11, str(tmp_path / "b"))
    c = run_sim(scenario, 12, str(tmp_path / "c"))
    assert a.trace_path and b.trace_path and c.trace_path
    assert digest(a.trace_path) == digest(b.trace_path)
    assert digest(a.trace_path) != digest(c.trace_path)
    assert Path(a.result_path).read_text() == Path(b.result_path).read_text().replace("/b/", "/a/")
