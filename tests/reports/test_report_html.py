"""report.html in a real headless browser (Debian's chromium; scripts/setup-browser installs it):
its scripts run, its tables hold exactly the numbers of report.json, and it paints a picture."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.html import TABLES, _value, headline
from reports.model import iter_tables
from reports.svg import fmt_ns

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no chromium: run scripts/setup-browser")]


def chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp()
    try:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Dom(HTMLParser):
    """Tables (by data-table, with data-scenario) as lists of {data-col: (data-value, text)}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[dict, list[dict]]] = []
        self.root: dict = {}
        self.ids: dict[str, list[str]] = {}
        self._cell: tuple[str, str, list[str]] | None = None
        self._row: dict | None = None
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "html":
            self.root = a
        elif tag == "table":
            self.tables.append((a, []))
        elif tag == "tr" and self.tables:
            self._row = {}
        elif tag == "td" and self._row is not None:
            self._cell = (a["data-col"], a.get("data-value", ""), [])
        if "id" in a and tag == "p":
            self._id = a["id"]
            self.ids[a["id"]] = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._id = None
        if tag == "td" and self._cell is not None and self._row is not None:
            col, value, text = self._cell
            self._row[col] = (value, "".join(text))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.tables[-1][1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[2].append(data)
        if self._id is not None:
            self.ids[self._id].append(data)


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (what chromium writes): width, height, rows of raw pixels."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r[i:i + 3]) for r in rows[::8] for i in range(0, stride, bpp * 8)]


@pytest.fixture(scope="module")
def dom(report: tuple[dict, Path]) -> Dom:
    _, out = report
    r = chromium("--dump-dom", (out / "report.html").resolve().as_uri())
    assert r.returncode == 0 and "<table" in r.stdout, r.stderr[-1000:]
    d = Dom()
    d.feed(r.stdout)
    return d


def test_scripts_ran(dom: Dom) -> None:
    assert dom.root.get("data-rendered") == "yes"
    status = "".join(dom.ids["status"])
    assert "1 failing chaos check(s)" in status and "failing conformance clause(s)" in status


def test_it_reads_as_a_verdict(report: tuple[dict, Path]) -> None:
    """A PASS/FAIL headline (without scripts), a table of contents whose links all land,
    simulated and live runs apart, histograms with both axes labelled, every '?' explained."""
    data, out = report
    html = (out / "report.html").read_text()
    assert '<p id="verdict" class="headline fail" data-verdict="fail">FAIL — 1 failing chaos check(s), 1 failing ' \
           "conformance clause(s)</p>" in html
    assert html.index('id="verdict"') < html.index('id="toc"') < html.index('id="filter"')
    toc = html[html.index('<nav id="toc">'):html.index("</nav>")]
    for target in re.findall(r'href="#([^"]+)"', toc):
        assert f'id="{target}"' in html, target
    sim, live = html.index('id="simulation"'), html.index('id="live"')
    assert "Simulated runs (virtual time)" in html and "Live and conformance runs (wall time)" in html
    assert sim < live and 'data-clock="wall"' in html[live:] and 'data-clock="wall"' not in html[sim:live]
    plots = re.findall(r'<svg[^>]*class="hist".*?</svg>', html)
    assert plots and all('data-axis="x"' in p and 'data-axis="y"' in p and "latency" in p for p in plots)
    assert "virtual time, log scale" in html
    for table_html in re.findall(r"<table.*?</table>(?:<p class=\"note unknown\">.*?</p>)*", html):
        if 'data-value="?"' in table_html:
            assert 'class="note unknown"' in table_html, table_html[:200]
    assert 'data-value="?"' in html, "the live trace's undecoded receipts are in a table"


def test_skipped_checks_do_not_fail_the_headline() -> None:
    report = {"chaos": {"summary": [{"status": "pass"}, {"status": "skipped"}]}, "conformance": []}
    assert headline(report) == (True, "PASS — all 2 chaos check(s) and conformance clause(s) held")
    report["conformance"] = [{"status": "error"}]
    assert headline(report) == (False, "FAIL — 1 failing conformance clause(s)")


def test_every_table_holds_the_numbers_of_the_json(report: tuple[dict, Path], dom: Dom) -> None:
    data, _ = report
    by_name: dict[tuple, list] = {}
    for attrs, rows in dom.tables:
        by_name.setdefault((attrs["data-table"], attrs.get("data-clock")), []).append((attrs, rows))
    shown = 0
    for path, all_rows in iter_tables(data):
        parts = {None: all_rows} if not all_rows or "clock" not in all_rows[0] else \
            {c: [r for r in all_rows if r["clock"] == c] for c in ("virtual", "wall")}
        for clock, rows in parts.items():
            if not rows:
                assert (path, clock) not in by_name
                continue
            (_, cells), = by_name[(path, clock)]
            cols = TABLES[path][1]
            assert [{k: c[k][0] for k, _, _ in cols} for c in cells] == [{k: _value(r.get(k)) for k, _, _ in cols}
                                                                        for r in rows], (path, clock)
            for c, r in zip(cells, rows):  # what people read matches too
                for k, _, kind in cols:
                    if kind == "ns":
                        assert c[k][1] == fmt_ns(r[k]), (path, k)
            shown += len(rows)
    assert shown > 50


def test_the_seed_grid_tables_match_the_runs(report: tuple[dict, Path], dom: Dom) -> None:
    data, _ = report
    grids = {(a["data-scenario"], a["data-clock"]): rows for a, rows in dom.tables if a["data-table"] == "chaos.runs"}
    runs = data["chaos"]["runs"]
    assert set(grids) == {(r["scenario"], r["clock"]) for r in runs}
    for (scenario, clock), rows in grids.items():
        mine = [r for r in runs if r["scenario"] == scenario and r["clock"] == clock]
        assert [(c["seed"][0], c["run"][0]) for c in rows] == [(str(r["seed"]), r["run"]) for r in mine]
        for c, r in zip(rows, mine):
            assert {k: v[0] for k, v in c.items() if k not in ("seed", "run") and v[0]} == r["checks"]


def test_it_paints_a_real_picture(report: tuple[dict, Path], tmp_path: Path) -> None:
    _, out = report
    png = tmp_path / "report.png"
    r = chromium(f"--screenshot={png}", "--window-size=1200,1600", (out / "report.html").resolve().as_uri())
    assert r.returncode == 0 and png.exists(), r.stderr[-1000:]
    width, height, pixels = png_pixels(png)
    assert (width, height) == (1200, 1600)
    colours = set(pixels)
    ink = sum(p != b"\xff\xff\xff" for p in pixels) / len(pixels)
    assert len(colours) > 20 and ink > 0.02, (len(colours), ink)
    assert any(p[2] > 150 and p[0] < 100 for p in pixels) or any(p[1] > 100 and p[0] < 80 for p in pixels)
