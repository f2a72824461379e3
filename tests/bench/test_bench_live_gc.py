"""bench/bench_live_gc.py measures what it says: its staged full collection comes during the
live run when nothing keeps it away, and not with the runtime's frozen heap. (Its child script
patches the runtime by name, which an import check does not see.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_live_gc import ROOT, one

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]


@pytest.mark.parametrize("mode,full", [("neither", 1), ("frozen", 0)])
def test_the_staged_full_collection_comes_during_the_run_unless_the_heap_is_frozen(
        tmp_path: Path, mode: str, full: int) -> None:
    text = (Path(ROOT) / "scenarios/pppp/chaos/lossy.yaml").read_text()
    short = tmp_path / "short.yaml"
    short.write_text(text.replace("duration: 6s", "duration: 2s").replace("settle: 2s", "settle: 500ms")
                     .replace("from: 2500ms, until: 4s", "from: 1500ms, until: 2s"))
    r = one(50_000, str(short), mode, 0.5)
    assert r["full"] == full, r
    assert r["collections"] > 0, r  # the run's own, counted
