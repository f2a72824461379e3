"""Per-protocol scenario profiles: roles, settings, operations, checks and wiring."""

from __future__ import annotations

import importlib

from harness.profiles.base import Profile


def get_profile(protocol: str) -> Profile:
    try:
        module = importlib.import_module(f"harness.profiles.{protocol}")
    except ModuleNotFoundError as e:
        if e.name == f"harness.profiles.{protocol}":
            raise KeyError(f"no scenario profile for {protocol!r} yet") from None
        raise
    return module.PROFILE
