"""The one map of protocols (harness/registry.py): every package it names is found through it
alone, says what it has, cites only clauses of its own catalogue, and lacks exactly what this
file says it lacks — so adding a part to a protocol is noticed, and losing one fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.node import DurableStore, NodeContext
from harness.registry import PARTS, REGISTRY, lacks, package, parts_table, protocols

# What each protocol's package does not have yet. Update it when a part lands (the test fails
# until you do, so the table in `zmq-harness protocols` and this file never disagree).
EXPECTED_LACKS: dict[str, list[str]] = {
    "dafka": [],
    "dcp": [],
    "eventbus": [],
    "pppp": [],
    "raft": [],
}


def test_the_registry_maps_each_protocol_to_its_package_and_nothing_else() -> None:
    assert protocols() == list(REGISTRY) == sorted(EXPECTED_LACKS)
    for name in protocols():
        assert package(name).name == name
    with pytest.raises(KeyError, match="unknown protocol 'smtp'; known: dafka, dcp"):
        package("smtp")


@pytest.mark.parametrize("name", sorted(EXPECTED_LACKS))
def test_each_package_lacks_exactly_what_is_listed(name: str) -> None:
    pkg = package(name)
    assert lacks(pkg) == EXPECTED_LACKS[name], f"{name} now lacks {lacks(pkg)}; update EXPECTED_LACKS"
    assert set(EXPECTED_LACKS[name]) <= set(PARTS)
    assert "strict" in pkg.tables and pkg.catalogue


@pytest.mark.parametrize("name", sorted(EXPECTED_LACKS))
def test_every_clause_a_package_cites_is_in_its_catalogue(name: str) -> None:
    pkg = package(name)
    cited: list[tuple[str, str]] = []
    cited += [(f"check {c.name}", c.clause) for c in pkg.checks.values() if c.clause]
    cited += [(f"check {c.name} (checker)", c.checker.clause) for c in pkg.checks.values()
              if c.checker is not None and getattr(c.checker, "clause", "")]
    cited += [(f"mutant {m}", clause) for m, (_, _, clause) in pkg.mutants.items()]
    from harness.conformance.case import load_case

    for role, rs in pkg.suites.items():
        assert rs.protocol == name and rs.role == role
        for path in rs.case_paths():
            case = load_case(path, pkg.peer_roles())
            cited += [(f"case {case.id}", c) for c in case.clauses]
            cited += [(f"case {case.id} step", s.clause) for s in case.steps if s.clause]
    unknown = [(who, clause) for who, clause in cited if clause not in pkg.catalogue]
    assert not unknown, f"{name}: clauses not in its catalogue: {unknown[:5]}"


@pytest.mark.parametrize("name", sorted(EXPECTED_LACKS))
def test_roles_mutants_and_targets_hang_together(name: str) -> None:
    pkg = package(name)
    for role, spec in pkg.roles.items():
        assert spec.name == role
        node = spec.factory(NodeContext(f"{role}-0", __import__("random").Random(1), DurableStore(),
                                        {"dialect": "strict"}))
        assert node.protocol == name and node.role == role
    for mutant, (role, factory, _) in pkg.mutants.items():
        assert role in pkg.roles, f"mutant {mutant} breaks role {role}, which {name} does not have"
        assert callable(factory)
    for role in pkg.final_status:
        assert role in pkg.roles
    for check in pkg.default_checks:
        assert check in pkg.checks
        # A check of a SHOULD or of an optional (MAY) feature runs only where a scenario names it.
        checker = pkg.checks[check].checker
        assert checker is None or checker.level == "MUST", f"{check} judges a {checker.level}: not a default"
    assert (pkg.resolve_target is not None) == bool(pkg.targets), "targets need a resolver and vice versa"
    for op in pkg.operations.values():
        assert set(op.roles) <= set(pkg.roles)
    # what the chaos proxy reports of an external node: only where the checks were reviewed for it
    assert pkg.observed_links in ("between", "all")
    assert pkg.observed_links == "between" or pkg.observed_checks


def test_zmq_harness_protocols_prints_what_each_has_and_lacks() -> None:
    out = subprocess.run([sys.executable, "-m", "harness.cli", "protocols"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out == parts_table()
    for name, missing in EXPECTED_LACKS.items():
        row = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert row.rstrip().endswith(", ".join(missing) if missing else "nothing")
