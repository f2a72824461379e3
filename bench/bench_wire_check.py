"""What the ``wire-conformance`` check every run gets costs: CPU seconds of simulated runs with
probes, checkers and the Parquet trace on, with the check and without it, on the simulator
bench's DCP scenario and one scenario of each other protocol.

    .venv/bin/python bench/bench_wire_check.py [--repeat 3] [--no-record]

CPU time of this process (``time.process_time``), the best of ``--repeat`` runs per variant:
the machine is shared, and wall time would measure the neighbours. Both totals still move with
the neighbours' load by more than the check costs, so the check's own share is also measured
inside one run: the thread time spent in its ``on_event`` over the thread time of the rest.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere, like the other benches

from bench.bench_sim import bench_scenario  # noqa: E402
from bench.common import command_line, record  # noqa: E402
from harness import composition  # noqa: E402
from harness.checkers import wire  # noqa: E402
from harness.scenario import Scenario, load_scenario  # noqa: E402

SCENARIOS: list[tuple[str, Callable[[], Scenario]]] = [
    ("bench_sim DCP (1 broker, 4 workers, 8 clients, 5 s)", lambda: bench_scenario(5.0)),
    ("scenarios/raft/chaos/leader-crash.yaml", lambda: load_scenario("scenarios/raft/chaos/leader-crash.yaml")),
    ("scenarios/eventbus/chaos/hundred-clients.yaml",
     lambda: load_scenario("scenarios/eventbus/chaos/hundred-clients.yaml")),
    ("scenarios/pppp/chaos/fifty-subscribers.yaml", lambda: load_scenario("scenarios/pppp/chaos/fifty-subscribers.yaml")),
    ("scenarios/dafka/chaos/multi-producer.yaml", lambda: load_scenario("scenarios/dafka/chaos/multi-producer.yaml")),
]
SEED = 11
BUILD = composition.build_checkers


def without_wire(scenario: Scenario) -> list:  # type: ignore[type-arg]
    return [c for c in BUILD(scenario) if c.name != wire.WIRE_CHECK]


def cpu_of(scenario: Scenario, variant: str, repeat: int) -> tuple[float, int]:
    """Best CPU seconds of ``repeat`` runs of one variant, and the messages judged."""
    best, judged = float("inf"), 0
    for _ in range(repeat):
        composition.build_checkers = without_wire if variant == "off" else BUILD  # type: ignore[assignment]
        with tempfile.TemporaryDirectory(prefix="bench-wire-") as out:
            t0 = time.process_time()
            result = composition.run_sim(scenario, SEED, out)
            best = min(best, time.process_time() - t0)
        judged = sum(int(v.detail.split(" ", 1)[0]) for v in result.verdicts
                     if v.check == wire.WIRE_CHECK and v.detail[:1].isdigit())
    composition.build_checkers = BUILD  # type: ignore[assignment]
    return best, judged


def own_share(scenario: Scenario, repeat: int) -> float:
    """The smallest share, over ``repeat`` runs, of the check's own thread time in a run (%)."""
    spent = [0.0]
    inner = wire.WireConformance.on_event

    def timed(self: wire.WireConformance, ev: object) -> None:
        t = time.thread_time()
        inner(self, ev)  # type: ignore[arg-type]
        spent[0] += time.thread_time() - t

    wire.WireConformance.on_event = timed  # type: ignore[method-assign]
    best = float("inf")
    try:
        for _ in range(repeat):
            spent[0] = 0.0
            with tempfile.TemporaryDirectory(prefix="bench-wire-") as out:
                t0 = time.thread_time()
                composition.run_sim(scenario, SEED, out)
                total = time.thread_time() - t0
            best = min(best, 100 * spent[0] / max(total - spent[0], 1e-9))
    finally:
        wire.WireConformance.on_event = inner  # type: ignore[method-assign]
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    rows = ["| scenario (seed 11) | messages judged | CPU s without the check | with it | difference | "
            "the check's own time / the rest of the run |", "|---|---|---|---|---|---|"]
    for label, make in SCENARIOS:
        scenario = make()
        off, _ = cpu_of(scenario, "off", args.repeat)
        on, judged = cpu_of(scenario, "on", args.repeat)
        share = own_share(scenario, args.repeat)
        row = f"| {label} | {judged} | {off:.2f} | {on:.2f} | {100 * (on - off) / off:+.1f}% | {share:.1f}% |"
        rows.append(row)
        print(row, flush=True)
    if not args.no_record:
        record("wire-conformance: cost of the check in every run", "\n".join(rows) + "\n\nEach run with probes, "
               "every checker of the scenario and the Parquet trace on; the best of the repeats in CPU seconds of "
               "the process (the machine is shared, so the difference of the totals is noisy); the last column is "
               "the smallest, over the repeats, of the thread time spent in the check's on_event over the "
               "thread time of the rest of the run (timer calls included).",
               command_line())


if __name__ == "__main__":
    main()
