"""Rules of DESIGN.md that code must not drift from:

* nodes are sans-IO: no module under reference_nodes/ (nor the node contract) imports zmq,
  simpy, time, socket, asyncio, threading, select or os-level randomness, and none draws from
  the global random generator — checked statically (AST) and at run time;
* imports only point down the layers (ground floor imports nothing of the project).
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

FORBIDDEN = {"zmq", "simpy", "time", "socket", "asyncio", "threading", "select", "multiprocessing",
             "subprocess", "secrets", "datetime"}
GLOBAL_RANDOM = {"random", "randint", "randrange", "choice", "choices", "shuffle", "sample", "uniform",
                 "gauss", "expovariate", "getrandbits", "randbytes", "seed", "triangular", "betavariate",
                 "normalvariate", "lognormvariate", "vonmisesvariate", "paretovariate", "weibullvariate"}
SANS_IO = sorted(Path("reference_nodes").rglob("*.py")) + [Path("harness/node.py")]


def imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
    return out


@pytest.mark.parametrize("path", SANS_IO, ids=str)
def test_nodes_import_no_io(path: Path) -> None:
    bad = [(m, line) for m, line in imports(path) if m.split(".")[0] in FORBIDDEN or m in ("os", "uuid")]
    assert not bad, f"{path} imports {bad}: nodes are sans-IO (DESIGN rule 1)"


@pytest.mark.parametrize("path", SANS_IO, ids=str)
def test_nodes_never_use_the_global_random_generator(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "random" \
                and node.attr in GLOBAL_RANDOM:
            bad.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "random":
            bad.extend(node.lineno for a in node.names if a.name in GLOBAL_RANDOM)
    assert not bad, f"{path}: global random generator used at lines {bad}; use the injected rng"


def test_a_run_leaves_the_global_random_state_untouched() -> None:
    from harness.composition import run_sim
    from harness.scenario import load_scenario

    random.seed(1234)
    before = random.getstate()
    for path in sorted(Path("scenarios").glob("*/*.yaml")):
        run_sim(load_scenario(str(path)), 3)
    assert random.getstate() == before, "something drew from the global random generator during a run"


GROUND = ["harness/protocols", "harness/node.py", "harness/trace.py", "harness/runtime.py", "harness/interrupts.py"]
LAYER2 = ["reference_nodes", "fault_injection", "harness/checkers", "harness/live"]
PROJECT = ("harness", "reference_nodes", "fault_injection", "reports")


def _project_imports(root: str) -> list[tuple[Path, str]]:
    paths = [Path(root)] if root.endswith(".py") else sorted(Path(root).rglob("*.py"))
    return [(p, m) for p in paths for m, _ in imports(p) if m.split(".")[0] in PROJECT]


@pytest.mark.parametrize("root", GROUND)
def test_ground_floor_imports_only_the_ground_floor(root: str) -> None:
    allowed = ("harness.protocols", "harness.node", "harness.trace", "harness.runtime", "harness.interrupts")
    bad = [(str(p), m) for p, m in _project_imports(root) if not m.startswith(allowed)]
    assert not bad, f"ground floor imports upward: {bad}"


@pytest.mark.parametrize("root", LAYER2)
def test_layer_two_uses_only_the_ground_floor_and_itself(root: str) -> None:
    own = root.replace("/", ".")
    allowed = ("harness.protocols", "harness.node", "harness.trace", "harness.runtime", "harness.interrupts", own)
    bad = [(str(p), m) for p, m in _project_imports(root) if not m.startswith(allowed)]
    assert not bad, f"{root} imports sideways or upward: {bad}"
