"""Every benchmark script still imports against today's harness.

Benchmarks are run by hand, so nothing else notices when a rename in the harness breaks one
(bench_pppp imported a function the run driver no longer had for a whole redesign)."""

from __future__ import annotations

import importlib
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_script_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    if name.startswith("bench_"):
        assert callable(getattr(module, "main", None)), f"bench/{name}.py has no main()"
