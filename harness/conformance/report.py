"""What a conformance run tells its user: a verdict per case and per clause, the evidence of
every failure, clause coverage of the catalogue, a JUnit XML file and the exit status."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from typing import Any, TextIO

from harness.conformance.conductor import ROBUSTNESS
from harness.conformance.exchange_log import ARROWS
from harness.conformance.runner import CaseResult
from harness.protocols import catalogue
from harness.protocols.clauses import Level, Observable

MANDATORY = ("MUST", "MUST NOT")


def clause_verdicts(results: list[CaseResult]) -> dict[str, tuple[str, list[str]]]:
    """clause -> (verdict, case ids). A clause fails when a failure is attributed to it, passes
    when a case covering it passed, and is 'not judged' when its cases failed on other clauses
    or were skipped."""
    out: dict[str, tuple[str, list[str]]] = {}
    for r in results:
        for clause in set(r.case.clauses) | ({r.clause} if r.clause else set()):
            verdict, cases = out.get(clause, ("not judged", []))
            if r.verdict in ("fail", "error") and r.clause == clause:
                verdict = r.verdict if verdict != "fail" else verdict
            elif r.verdict == "pass" and verdict == "not judged":
                verdict = "pass"
            out[clause] = (verdict, cases + [r.case.id])
    return out


def coverage(protocol: str, role: str, results: list[CaseResult]) -> tuple[list[str], list[str]]:
    """(covered, uncovered) observable clauses of the catalogue that constrain this role."""
    cat = catalogue(protocol)
    relevant = [c.id for c in cat if c.observable in (Observable.WIRE, Observable.TIMING)
                and (not c.roles or role in c.roles)]
    named = {cl for r in results for cl in r.case.clauses}
    return [c for c in relevant if c in named], [c for c in relevant if c not in named]


def exit_status(results: list[CaseResult], fail_on: str = "must") -> int:
    levels = MANDATORY + (("SHOULD", "SHOULD NOT") if fail_on == "should" else ())
    for r in results:
        if r.verdict == "error":
            return 1
        if r.verdict == "fail" and (r.level in levels or not r.level):
            return 1
    return 0


def print_header(protocol: str, role: str, count: int, out: TextIO) -> None:
    out.write(f"{protocol} {role}: {count} case(s)\n")
    out.flush()


def print_case(r: CaseResult, out: TextIO, width: int = 24) -> None:
    """One case's verdict line, and for a failure its evidence (as soon as the case ends)."""
    mark = {"pass": "pass ", "fail": "FAIL ", "error": "ERROR", "skipped": "skip "}[r.verdict]
    extra = f" [{r.clause} {r.level}]" if r.verdict in ("fail", "error") and r.clause else ""
    out.write(f"  {mark} {r.case.id:<{width}}  {r.case.name}{extra}\n")
    if r.verdict == "skipped" and r.reason:  # why it does not apply (a dialect, an optional feature)
        out.write(f"         {printable(r.reason.splitlines()[0])}\n")
    if r.verdict in ("fail", "error"):
        for line in r.reason.splitlines() or [""]:
            out.write(f"         {printable(line)}\n")
        for e in r.exchange[-8:]:
            arrow = ARROWS.get(e["dir"], "<-")
            body = e.get("fields") or e.get("frames")
            out.write(f"         {e['t_ms']:>9.3f} ms {arrow} {e['peer']:<10} {e['message']} "
                      f"{json.dumps(body, default=str)[:160]}\n")
        if r.iut_output:
            out.write("         implementation output (last lines):\n")
            for line in r.iut_output.splitlines()[-5:]:
                out.write(f"           | {printable(line)}\n")
        if r.rerun:
            out.write(f"         rerun: {r.rerun}\n")
    out.flush()


def print_summary(results: list[CaseResult], protocol: str, role: str, out: TextIO, verbose: bool = False) -> None:
    """The clause table, coverage and counts, once every case has run."""
    verdicts = clause_verdicts(results)
    out.write("\nclauses:\n")
    for clause in sorted(verdicts, key=lambda c: (verdicts[c][0] != "fail", c)):
        v, cases = verdicts[clause]
        out.write(f"  {v:<10} {_level_text(protocol, clause):<10} {clause}  ({len(cases)} case(s))\n")
    covered, missing = coverage(protocol, role, results)
    total = len(covered) + len(missing)
    out.write(f"\ncoverage: {len(covered)}/{total} wire/timing clauses for the {role} role have a case\n")
    if missing and verbose:
        out.write("  without a case: " + ", ".join(missing) + "\n")
    counts = {k: sum(1 for r in results if r.verdict == k) for k in ("pass", "fail", "error", "skipped")}
    out.write(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors, {counts['skipped']} skipped\n")
    out.flush()


def print_results(results: list[CaseResult], protocol: str, role: str, out: TextIO, verbose: bool = False) -> None:
    print_header(protocol, role, len(results), out)
    width = case_width(results)
    for r in results:
        print_case(r, out, width)
    print_summary(results, protocol, role, out, verbose)


def case_width(results: list[Any]) -> int:
    """Width of the case-id column: ``results`` are CaseResults or Cases."""
    return max((len(getattr(r, "case", r).id) for r in results), default=10)


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f)}


def printable(text: str) -> str:
    """Text from the implementation (its output, its messages) with control characters shown
    as escapes, so that it cannot move the cursor, clear the screen or recolour a terminal."""
    return text.translate(_CONTROL)


def write_junit(path: str, results: list[CaseResult], protocol: str, role: str, implementation: str) -> None:
    suite = ET.Element("testsuite", name=f"{protocol}.{role}", tests=str(len(results)),
                       failures=str(sum(r.verdict == "fail" for r in results)),
                       errors=str(sum(r.verdict == "error" for r in results)),
                       skipped=str(sum(r.verdict == "skipped" for r in results)),
                       time=f"{sum(r.elapsed_ms for r in results) / 1000:.3f}")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="implementation", value=implementation)
    for r in results:
        tc = ET.SubElement(suite, "testcase", classname=f"{protocol}.{role}", name=r.case.id,
                           time=f"{r.elapsed_ms / 1000:.3f}")
        tprops = ET.SubElement(tc, "properties")
        for c in r.case.clauses:
            ET.SubElement(tprops, "property", name="clause", value=c)
        if r.verdict in ("fail", "error"):
            el = ET.SubElement(tc, "failure" if r.verdict == "fail" else "error",
                               message=f"[{r.clause} {r.level}] {r.reason}"[:1000], type=r.clause or "error")
            el.text = json.dumps({"exchange": r.exchange, "rerun": r.rerun, "implementation_output": r.iut_output},
                                 indent=1, default=str)
        elif r.verdict == "skipped":
            ET.SubElement(tc, "skipped", message=r.reason)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def results_json(results: list[CaseResult], protocol: str, role: str, implementation: str) -> dict[str, Any]:
    return {
        "protocol": protocol, "role": role, "implementation": implementation,
        "cases": [r.to_dict() for r in results],
        "clauses": {c: {"verdict": v, "level": _level_text(protocol, c, ""), "cases": cases}
                    for c, (v, cases) in clause_verdicts(results).items()},
        "coverage": dict(zip(("covered", "uncovered"), coverage(protocol, role, results))),
    }


def level_of(protocol: str, clause: str) -> Level | None:
    """The level of a clause of the catalogue, or MUST for the harness's robustness verdict."""
    if clause == ROBUSTNESS:
        return Level.MUST
    cat = catalogue(protocol)
    return cat[clause].level if clause in cat else None


def _level_text(protocol: str, clause: str, unknown: str = "?") -> str:
    level = level_of(protocol, clause)
    return level.value if level is not None else unknown
