"""Event BUS conformance suites (server, client): to come in this branch."""

from __future__ import annotations

from harness.packages.base import RoleSuite

SUITES: dict[str, RoleSuite] = {}
