"""PPPP's conformance suites (filled in below)."""

from __future__ import annotations

from harness.packages.base import RoleSuite

SUITES: dict[str, RoleSuite] = {}
