"""Explore and shrink: search a scenario's fault space for a failing schedule with hypothesis,
shrink it to the smallest one that fails the same property, and write it as an ordinary
scenario file with an explanation and a space-time diagram (docs/explore.md).

Modules: `space` (the vocabulary and bounds, from the file's ``explore:`` section),
`strategies` (hypothesis strategies over it), `candidate` (one point of the space, rendered to
a scenario file and run), `search` (the budgeted search, random or coverage-guided via
`coverage`), `shrink` (delta debugging and scenario-aware reductions), `explain` and `diagram`
(what the user reads), `driver` (all of it, for ``zmq-harness explore``).
"""

from harness.explore.driver import ExploreReport, explore

__all__ = ["ExploreReport", "explore"]
