"""The short explanation of a shrunk failure: which property, which clause, which faults,
which messages, and how to replay it. Written as Markdown beside the scenario file and shown
above the space-time diagram in the HTML page."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

from harness.checkers.base import Verdict
from harness.explore.candidate import Property, fmt_duration
from harness.registry import package

EVIDENCE_SHOWN = 8


@dataclass
class Explanation:
    title: str
    sections: list[tuple[str, list[str]]] = field(default_factory=list)  # heading, lines (Markdown)

    def add(self, heading: str, lines: list[str]) -> None:
        if lines:
            self.sections.append((heading, lines))

    def to_markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for heading, lines in self.sections:
            out += [f"## {heading}", ""] + [f"- {line}" if not line.startswith("    ") else line for line in lines]
            out.append("")
        return "\n".join(out)

    def to_html(self) -> str:
        out = [f"<h1>{html.escape(self.title)}</h1>"]
        for heading, lines in self.sections:
            out.append(f"<h2>{html.escape(heading)}</h2><ul>")
            out += [f"<li>{_inline(line.strip())}</li>" for line in lines]
            out.append("</ul>")
        return "\n".join(out)


def _inline(text: str) -> str:
    """Markdown's `code` spans as <code>, everything else escaped."""
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def describe_fault(item: dict[str, Any]) -> str:
    """One fault item in words."""
    if "rule" in item:
        body = item["rule"]
        effect = next(k for k in ("drop", "duplicate", "delay", "reorder", "corrupt", "pass") if k in body)
        how = effect if body[effect] is True or effect in ("drop", "pass") else f"{effect} ({body[effect]})"
        chance = body.get("probability", "100%")
        where = "".join(f" {k} {body[k]}" for k in ("from", "to") if k in body)
        if "nth" in body:
            share = "" if chance == "100%" else f" ({chance} of them)"
            return (f"{how} the {body.get('message', 'any')} message(s){where} number {body['nth']}, counted from "
                    f"the start of the run{share}")
        return f"all run long: {how} {chance} of the {body.get('message', 'any')} messages{where}"
    if "crash" in item:
        after = item.get("restart_after")
        return f"at {item['at']}: crash {item['crash']}" + (f", restarted {after} later" if after else ", never restarted")
    window = f"from {item.get('from', '0s')} to {item['until']}" if "until" in item else f"from {item.get('from', '0s')} on"
    if "pause" in item:
        return f"{window}: pause {item['pause']}"
    if "partition" in item:
        sides = " | ".join("[" + ", ".join(map(str, side)) + "]" for side in item["partition"])
        kind = "one-way partition (first side cannot reach the second)" if item.get("one_way") else "partition"
        return f"{window}: {kind} {sides}"
    if "slow_link" in item:
        a, b = item["slow_link"]
        arrow = "->" if item.get("both_ways") is False else "<->"
        return f"{window}: slow link {a} {arrow} {b}, latency {item['latency']}"
    if "clock_skew" in item:
        return (f"at {item.get('at', '0s')}: clock of {item['clock_skew']} off by {item.get('offset', '0s')}"
                + (f", drifting {item['drift']}" if item.get("drift") else ""))
    return json.dumps(item)


def clause_text(protocol: str, clause: str) -> str:
    catalogue = package(protocol).catalogue
    if clause in catalogue:
        c = catalogue[clause]
        return f"{c.level.value}: \"{c.text}\" ({c.section})"
    return ""


def explain(*, protocol: str, scenario_file: str, source: str, prop: Property, verdict: Verdict | None, seed: int,
            faults: list[dict[str, Any]], mutants: dict[str, tuple[str, str]], topology: list[str], duration_ns: int,
            replay: str, history: list[str], found_by: str) -> Explanation:
    """``mutants``: group -> (mutant, the clause it breaks)."""
    ex = Explanation(f"{prop.check} fails in {len(faults)} fault(s), seed {seed}")
    what = [f"property `{prop.check}`, clause `{prop.clause}`"]
    text = clause_text(protocol, prop.clause)
    if text:
        what.append(text)
    if verdict is not None:
        what.append(f"verdict: {verdict.detail}")
    ex.add("What fails", what)
    ex.add("Replay", [f"`{replay}` (file `{scenario_file}`, shrunk from `{source}`)"])
    ex.add("Nodes", [f"{len(topology)} node(s): {', '.join(topology)}; the run lasts {fmt_duration(duration_ns)}"]
           + [f"group `{g}` runs the mutant `{m}` (it breaks `{c}`)" for g, (m, c) in mutants.items()])
    ex.add("Faults", [describe_fault(f) for f in faults] or ["none: the failure needs no fault"])
    if verdict is not None and verdict.evidence:
        shown = verdict.evidence[:EVIDENCE_SHOWN]
        lines = [describe_event(ev) for ev in shown]
        if len(verdict.evidence) > len(shown):
            lines.append(f"... and {len(verdict.evidence) - len(shown)} more in the verdict's evidence")
        ex.add("Messages and events involved (the verdict's evidence)", lines)
    ex.add("How it was found", [found_by] + history)
    return ex


def describe_event(ev: dict[str, Any]) -> str:
    """One evidence item of a verdict (`harness.checkers.base.Event.describe`) in one line."""
    head = f"{ev.get('time_ms', '?')} ms {ev.get('node', '?')} {ev.get('kind', '')}"
    if ev.get("message"):
        head += f" {ev['message']}"
    body = ev.get("fields") or ev.get("data") or ev.get("frames")
    if body:
        text = json.dumps(body, default=str, ensure_ascii=False)
        head += f" `{text[:160]}{'...' if len(text) > 160 else ''}`"
    return head


def evidence_times_ns(verdict: Verdict | None) -> list[int]:
    out = []
    for ev in (verdict.evidence if verdict is not None else []):
        t = ev.get("time_ms")
        if isinstance(t, (int, float)):
            out.append(int(round(t * 1e6)))
    return out

