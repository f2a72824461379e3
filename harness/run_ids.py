"""Run ids for runs that are not simulated.

A simulated run is named by its scenario and seed (`<scenario>/<seed>`): the same seed is the same
run, byte for byte. A live or conformance run is not repeatable, so two of them with the same
scenario and seed are different runs, and the report (which pairs messages per run, and counts
runs) must not mix them up: their ids carry the UTC start time and a random suffix.
"""

from __future__ import annotations

import datetime
import secrets


def unique_run_id(base: str) -> str:
    """``base@<UTC start, to the second>-<6 hex digits>``, e.g. ``dcp-clean/live-1@20261121T085800Z-3fa9c1``."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{base}@{stamp}-{secrets.token_hex(3)}"
