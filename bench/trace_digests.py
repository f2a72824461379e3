"""SHA-256 of the trace of every shipped scenario for a few seeds, as JSON.

A refactor that must not change what the harness records is checked by running this before
and after and comparing the two files:

    python bench/trace_digests.py --seeds 1-3 > before.json
    ... change ...
    python bench/trace_digests.py --seeds 1-3 --compare before.json

The traces themselves are kept in --out (default: a temporary directory) so a difference can
be looked at row by row. ``--verdicts`` also records every verdict of every run (check, clause,
level, passed, detail, evidence), so that a comparison proves the verdicts unchanged as well
as the bytes of the trace:

    python bench/trace_digests.py --seeds 1-2 --verdicts > before.json
    python bench/trace_digests.py --seeds 1-2 --verdicts --compare before.json
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.scenario import load_scenario, parse_seeds  # noqa: E402


def shipped_scenarios(root: str) -> list[str]:
    paths = set(glob.glob(os.path.join(root, "*", "*.yaml"))) | set(glob.glob(os.path.join(root, "*", "chaos", "*.yaml")))
    return sorted(paths)


def digests(root: str, seeds: list[int], out: str, verdicts: bool = False) -> dict[str, Any]:
    """``path#seed`` -> the trace's SHA-256; with ``verdicts``, also ``path#seed verdicts`` ->
    the run's verdicts as dictionaries (JSON-normalised, so that they compare with a file)."""
    from harness.composition import run_sim  # noqa: PLC0415 - imported late: the harness may be mid-refactor

    result: dict[str, Any] = {}
    for path in shipped_scenarios(root):
        scenario = load_scenario(path)
        for seed in seeds:
            run = run_sim(scenario, seed, out)
            key = f"{os.path.relpath(path, root)}#{seed}"
            with open(run.trace_path, "rb") as f:  # type: ignore[arg-type]
                result[key] = hashlib.sha256(f.read()).hexdigest()
            if verdicts:
                result[f"{key} verdicts"] = json.loads(json.dumps([v.to_dict() for v in run.verdicts], default=str))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                   "scenarios"))
    ap.add_argument("--out", default=None, help="keep the traces here")
    ap.add_argument("--verdicts", action="store_true", help="also record (and compare) every run's verdicts")
    ap.add_argument("--compare", help="a JSON file written by an earlier run: list what differs, exit 1 if any")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="trace-digests-")
    now = digests(args.root, parse_seeds(args.seeds), out, args.verdicts)
    if not args.compare:
        print(json.dumps(now, indent=1, sort_keys=True))
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in differ:
        print(f"differs: {k}")
    same = {k for k in now if k not in differ}
    runs = [k for k in now if not k.endswith(" verdicts")]
    print(f"{len([k for k in runs if k in same])}/{len(runs)} traces identical; traces in {out}")
    if args.verdicts:
        judged = [k for k in now if k.endswith(" verdicts")]
        print(f"{len([k for k in judged if k in same])}/{len(judged)} runs with identical verdicts "
              f"({sum(len(now[k]) for k in judged)} verdicts)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
