"""The one map of protocols: name -> the module of its package, which exposes ``PACKAGE`` (a
`harness.packages.base.ProtocolPackage`). Everything above the second layer finds a protocol
here: scenarios, runs, conformance suites, mutants and the command line.

    from harness.registry import package
    dcp = package("dcp")          # imports harness.packages.dcp, and no other protocol's
    dcp.roles["broker"].factory   # the reference broker

Adding a protocol is one package under harness/packages/ and one line below
(docs/adding-a-protocol.md); ``zmq-harness protocols`` prints what each one has and lacks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.packages.base import ProtocolPackage, RoleSuite

REGISTRY: dict[str, str] = {
    "dafka": "harness.packages.dafka",
    "dcp": "harness.packages.dcp",
    "eventbus": "harness.packages.eventbus",
    "pppp": "harness.packages.pppp",
    "raft": "harness.packages.raft",
}

# The parts a complete package has; `lacks` names the empty ones. Symbolic fault targets and
# final-status roles are not among them: a protocol may rightly define none.
PARTS = ("tables", "catalogue", "roles", "operations", "checks", "mutants", "suites", "wire", "command")


def protocols() -> list[str]:
    return list(REGISTRY)


def package(name: str) -> ProtocolPackage:
    """The package of a protocol; KeyError naming the known protocols for an unknown one."""
    try:
        path = REGISTRY[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown protocol {name!r}; known: {', '.join(REGISTRY)}") from None
    pkg = importlib.import_module(path).PACKAGE
    if pkg.name != name:
        raise ValueError(f"the registry maps {name!r} to {path}, whose package is {pkg.name!r}")
    return pkg


def suites() -> list[tuple[str, str]]:
    """(protocol, role) of every conformance suite (imports every package)."""
    return [(p, role) for p in REGISTRY for role in package(p).suites]


def suite(protocol: str, role: str) -> RoleSuite:
    """The conformance suite of a role; KeyError listing every suite when there is none."""
    found = package(protocol).suites.get(role) if protocol in REGISTRY else None
    if found is None:
        have = ", ".join(f"{p}:{r}" for p, r in suites())
        raise KeyError(f"no conformance suite for {protocol}:{role} (suites: {have})")
    return found


def lacks(pkg: ProtocolPackage) -> list[str]:
    """The parts (`PARTS`) a package does not have yet."""
    return [part for part in PARTS if not getattr(pkg, part)]


# The checks every run gets besides its scenario's (harness.composition.build_checkers).
EVERY_RUN = ("no-node-errors", "wire-conformance")


def parts_table(names: list[str] | None = None) -> str:
    """A plain-text table of what each protocol's package has and lacks."""
    header = ("protocol", "dialects", "clauses", "roles", "operations", "checks", "mutants", "suites", "targets",
              "lacks")
    rows = [header]
    for name in names or protocols():
        pkg = package(name)
        rows.append((name, ", ".join(pkg.tables), str(len(pkg.catalogue)), ", ".join(pkg.roles) or "-",
                     ", ".join(pkg.operations) or "-", str(len(pkg.checks)) if pkg.checks else "-",
                     str(len(pkg.mutants)) if pkg.mutants else "-", ", ".join(pkg.suites) or "-",
                     ", ".join(pkg.targets) or "-", ", ".join(lacks(pkg)) or "nothing"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return ("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"
            f"\nEvery run of every protocol also judges {', '.join(EVERY_RUN)} (not counted above).\n")
