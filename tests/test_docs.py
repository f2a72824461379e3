"""The examples in docs/ run: decode commands print what the docs show, Python blocks execute,
scenario YAML blocks are valid and pass (live ones over real sockets)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.composition import run_sim
from harness.scenario import parse_scenario

DOCS = sorted(Path("docs").glob("*.md")) + [Path("README.md")]
BIN = Path(sys.executable).parent / "zmq-harness"


def blocks(lang: str) -> list[tuple[str, int, str]]:
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S):
            out.append((str(path), text[: m.start()].count("\n") + 1, m.group(1)))
    return out


def decode_examples() -> list[tuple[str, str, str]]:
    out = []
    for path, line, body in blocks("console"):
        cmds = re.split(r"^\$ ", body, flags=re.M)[1:]
        for chunk in cmds:
            cmd, _, expected = chunk.partition("\n")
            if cmd.startswith("zmq-harness decode"):
                out.append((f"{path}:{line}", cmd, expected))
    return out


@pytest.mark.parametrize("where,cmd,expected", decode_examples())
def test_decode_examples_print_what_the_docs_show(where: str, cmd: str, expected: str) -> None:
    args = shlex.split(cmd)[1:]
    r = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=60)
    assert r.stdout == expected, f"{where}: {cmd}\n--- got\n{r.stdout}--- docs\n{expected}"


@pytest.mark.parametrize("where,code", [(f"{p}:{n}", b) for p, n, b in blocks("python")])
def test_python_examples_run(where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # run from a copy of the checkout's layout (links), so what an example writes to runs/ lands
    # in tmp_path and not in the report of `./scripts/main`
    root = Path.cwd()
    for entry in root.iterdir():
        if entry.name != "runs":
            (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, where, "exec"), {"__name__": "docs_example"})


@pytest.mark.parametrize("where,text", [(f"{p}:{n}", b) for p, n, b in blocks("yaml") if "protocol:" in b])
@pytest.mark.timeout(120)
def test_scenario_examples_are_valid_and_pass(where: str, text: str, tmp_path: Path) -> None:
    text = text.replace('"zmq-harness ', f'"{BIN} ')
    scenario = parse_scenario(text, where)
    if scenario.external:
        from harness.composition import run_live

        result = run_live(scenario, 1, str(tmp_path))
    else:
        result = run_sim(scenario, 1, str(tmp_path))
    if not result.ok:  # (every detail in full: pytest shortens a long assertion message)
        pytest.fail("\n".join(f"{v.check} [{v.clause}]: {v.detail}\n  evidence: {v.evidence[:4]}"
                               for v in result.failed))


def test_relative_links_land_and_no_merge_leftovers() -> None:
    """Every relative link of the docs names a file that exists (docs/conformance.md once linked
    a page that did not), and no "To be merged" note or conflict marker is left in them."""
    dead, leftovers = [], []
    for path in DOCS:
        text = path.read_text()
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
            landing = (path.parent / target).resolve()
            # a link out of the checkout lands only where the checkout happens to sit
            if not landing.exists() or not landing.is_relative_to(Path.cwd().resolve()):
                dead.append(f"{path}: {target}")
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r"to be merged|^(<<<<<<<|>>>>>>>) ", line, re.I):
                leftovers.append(f"{path}:{n}: {line.strip()}")
    assert not dead, dead
    assert not leftovers, leftovers


def test_the_errata_index_counts_each_documents_entries() -> None:
    """The table at the top of docs/errata.md says how many entries each document has: it must
    stay true as entries are added (it said 25 for Raft when there were 32)."""
    text = Path("docs/errata.md").read_text()
    table = dict(re.findall(r"^\| \[[^]]+\]\(#([a-z0-9-]+)\) \| (\d+) \|$", text, re.M))
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    counted = {}
    for section in sections:
        title = section.splitlines()[0]
        anchor = re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
        counted[anchor] = len(re.findall(r"^### E-[A-Z]+-\d+", section, re.M))
    assert table and {a: int(n) for a, n in table.items()} == {a: counted[a] for a in table}, (table, counted)
