"""Explore and shrink: search a scenario's fault space for a failing schedule with hypothesis,
shrink it to the smallest one that fails the same property, and write it as an ordinary
scenario file with an explanation and a space-time diagram (docs/explore.md).

Modules: `space` (the vocabulary and bounds, from the file's ``explore:`` section),
`strategies` (hypothesis strategies over it), `candidate` (one point of the space, rendered to
a scenario file and run), `search` (the budgeted search, random or coverage-guided via
`coverage`), `shrink` (delta debugging and scenario-aware reductions), `explain` and `diagram`
(what the user reads), `driver` (all of it, for ``zmq-harness explore``).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.explore.driver import ExploreReport, explore

__all__ = ["ExploreReport", "explore"]


def __getattr__(name: str) -> Any:
    # imported on first use: the driver pulls in hypothesis and the run driver, which every other
    # `zmq-harness` command (a `node` started per conformance case above all) would pay for
    if name in __all__:
        from harness.explore import driver

        return getattr(driver, name)
    raise AttributeError(f"module 'harness.explore' has no attribute {name!r}")
