"""A Lamport (space-time) diagram of a run, from its trace, as SVG in a self-contained HTML page.

One vertical line per node (scenario order), time going down; each message is an arrow from
its send to each of its receives (the trace links them by ``msg_id``), a lost message ends in a
cross, crashes, restarts and pauses mark the node's line, partitions and heals cross the whole
width, and the events the failed verdict names as evidence are ringed and numbered. Rows are
the distinct event times (a logical clock, so quiet stretches take no room); the left margin
gives each row's virtual time. A long run shows only the messages nearest the evidence and
the faults (the page says how many of how many).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from harness.trace import read_trace

MAX_MESSAGES = 250
MAX_EVENTS = 200
COL_W, ROW_H, LEFT, TOP = 140, 18, 120, 80
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#ff7f0e",
           "#393b79", "#637939", "#8c6d31")
COLUMNS = ["node", "kind", "time_ns", "msg_type", "peer", "msg_id", "fault", "detail", "corr"]
LIFECYCLE = ("crash", "restart", "pause", "resume", "error")
MARKED = ("command", "deliver", "discard", "note")
NEMESIS = "nemesis"


@dataclass
class _Message:
    send: dict[str, Any] | None = None
    recvs: list[dict[str, Any]] = field(default_factory=list)
    drops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def time_ns(self) -> int:
        first = self.send or (self.recvs or self.drops)[0]
        return first["time_ns"]

    @property
    def nodes(self) -> set[str]:
        rows = ([self.send] if self.send else []) + self.recvs + self.drops
        return {r["node"] for r in rows} | {r["peer"] for r in rows if r.get("peer")}


def lamport_svg(trace_path: str, nodes: list[str], roles: dict[str, str], evidence: list[dict[str, Any]],
                labels: dict[str, str] | None = None, verdict: str = "") -> tuple[str, str]:
    """The SVG of a run and a one-line note on what it shows. ``labels`` mark nodes (a
    mutant's name); ``evidence`` are the failed verdict's evidence items (time_ms, node, kind)."""
    rows = sorted(read_trace(trace_path).select(COLUMNS).to_pylist(), key=lambda r: r["time_ns"])
    messages: dict[int, _Message] = {}
    others: list[dict[str, Any]] = []
    for r in rows:
        if r["kind"] in ("send", "recv", "drop") and r["msg_id"] is not None:
            m = messages.setdefault(r["msg_id"], _Message())
            if r["kind"] == "send":
                m.send = r
            else:
                (m.recvs if r["kind"] == "recv" else m.drops).append(r)
        elif r["kind"] in LIFECYCLE or r["node"] == NEMESIS or r["kind"] in MARKED:
            others.append(r)
    marks = _evidence_marks(rows, evidence)
    focus_times = [r["time_ns"] for r in rows if id(r) in marks] + [r["time_ns"] for r in others
                                                                    if r["kind"] in LIFECYCLE or r["node"] == NEMESIS]
    focus_nodes = {r["node"] for r in rows if id(r) in marks}
    shown = _nearest(list(messages.values()), focus_times, focus_nodes, MAX_MESSAGES,
                     lambda m: m.time_ns, lambda m: bool(m.nodes & focus_nodes))
    if shown:
        lo = min(m.time_ns for m in shown)
        hi = max(r["time_ns"] for m in shown for r in ([m.send] if m.send else []) + m.recvs + m.drops)
    else:
        lo, hi = 0, max((r["time_ns"] for r in rows), default=0)
    keep = [r for r in others if r["kind"] in LIFECYCLE or r["node"] == NEMESIS or id(r) in marks]
    marked = [r for r in others if r["kind"] in MARKED and lo <= r["time_ns"] <= hi and id(r) not in marks]
    keep += _nearest(marked, focus_times, focus_nodes, MAX_EVENTS, lambda r: r["time_ns"], lambda r: False)
    note = (f"showing {len(shown)} of {len(messages)} messages (those nearest the evidence and the faults)"
            if len(shown) < len(messages) else f"{len(messages)} messages")
    return _Svg(nodes, roles, labels or {}).render(shown, keep, marks, verdict), note


def _evidence_marks(rows: list[dict[str, Any]], evidence: list[dict[str, Any]]) -> dict[int, int]:
    """Trace row (by id) -> evidence number (1-based) for every evidence item found in the trace."""
    out: dict[int, int] = {}
    for k, ev in enumerate(evidence, 1):
        t = ev.get("time_ms")
        if not isinstance(t, (int, float)):
            continue
        for r in rows:
            if r["node"] == ev.get("node") and r["kind"] == ev.get("kind") and abs(r["time_ns"] / 1e6 - t) < 0.0015 \
                    and id(r) not in out:
                out[id(r)] = k
                break
    return out


def _nearest(items: list[Any], focus: list[int], focus_nodes: set[str], limit: int, time_of: Any,
             involved: Any) -> list[Any]:
    """At most ``limit`` items, those nearest (in time) to a focus time, items involving a focus
    node first; in time order."""
    if len(items) <= limit:
        return items
    if not focus:
        return items[-limit:]
    focus = sorted(focus)

    def distance(item: Any) -> tuple[int, int]:
        t = time_of(item)
        return (0 if involved(item) else 1, min(abs(t - f) for f in focus))

    chosen = sorted(items, key=distance)[:limit]
    return sorted(chosen, key=time_of)


class _Svg:
    def __init__(self, nodes: list[str], roles: dict[str, str], labels: dict[str, str]) -> None:
        self.nodes = nodes
        self.col = {n: i for i, n in enumerate(nodes)}
        self.roles = roles
        self.labels = labels
        self.colors: dict[str, str] = {}
        self.out: list[str] = []

    def x(self, node: str | None) -> float | None:
        if node is None or node not in self.col:
            return None
        return LEFT + self.col[node] * COL_W + COL_W / 2

    def color(self, msg_type: str | None) -> str:
        key = msg_type or "?"
        if key not in self.colors:
            self.colors[key] = PALETTE[len(self.colors) % len(PALETTE)]
        return self.colors[key]

    def render(self, messages: list[_Message], events: list[dict[str, Any]], marks: dict[int, int], verdict: str) -> str:
        times = sorted({r["time_ns"] for m in messages for r in ([m.send] if m.send else []) + m.recvs + m.drops}
                       | {r["time_ns"] for r in events})
        self.row = {t: i for i, t in enumerate(times)}
        width = LEFT + COL_W * len(self.nodes) + 40
        bottom = TOP + ROW_H * (len(times) + 2)
        self._frame(times, width, bottom)
        self._lifelines(events, bottom)
        for m in sorted(messages, key=lambda m: m.time_ns):
            self._message(m)
        for r in events:
            self._event(r, width)
        for r in [r for m in messages for r in ([m.send] if m.send else []) + m.recvs + m.drops] + events:
            if id(r) in marks:
                self._mark(r, marks[id(r)])
        if verdict:
            y = bottom - ROW_H / 2
            self.out.append(f'<line x1="{LEFT - 10}" y1="{y}" x2="{width - 20}" y2="{y}" stroke="#d62728" '
                            f'stroke-width="2"/><text x="{LEFT}" y="{y + 14}" fill="#d62728" font-weight="bold">'
                            f'{html.escape(verdict)}</text>')
            bottom += 20
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bottom + 10}" '
                f'font-family="sans-serif" font-size="11"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" '
                f'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
                f'fill="context-stroke"/></marker></defs>')
        return head + "".join(self.out) + "</svg>"

    def y(self, t: int) -> float:
        return TOP + ROW_H * (self.row[t] + 1)

    def _frame(self, times: list[int], width: int, bottom: float) -> None:
        for n in self.nodes:
            x = self.x(n)
            label = self.labels.get(n)
            self.out.append(f'<text x="{x}" y="{TOP - 40}" text-anchor="middle" font-weight="bold">{html.escape(n)}'
                            f'</text><text x="{x}" y="{TOP - 26}" text-anchor="middle" fill="#555">'
                            f'{html.escape(self.roles.get(n, ""))}</text>')
            if label:
                self.out.append(f'<text x="{x}" y="{TOP - 12}" text-anchor="middle" fill="#d62728">'
                                f'{html.escape(label)}</text>')
            self.out.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{bottom}" stroke="#bbb"/>')
        previous = None
        for t in times:
            if previous is None or t - previous >= 1_000_000 or self.row[t] % 5 == 0:
                self.out.append(f'<text x="{LEFT - 14}" y="{self.y(t) + 4}" text-anchor="end" fill="#777">'
                                f'{t / 1e6:.3f} ms</text>')
            previous = t

    def _lifelines(self, events: list[dict[str, Any]], bottom: float) -> None:
        """A crashed node's line is grey and dashed until it restarts; a paused one's orange."""
        open_: dict[tuple[str, str], float] = {}
        ends = {"crash": "restart", "pause": "resume"}
        styles = {"crash": 'stroke="#999" stroke-dasharray="3,3" stroke-width="5"',
                  "pause": 'stroke="#ff7f0e" stroke-width="5" stroke-opacity="0.5"'}
        for r in events:
            if r["kind"] in ends:
                open_[(r["node"], r["kind"])] = self.y(r["time_ns"])
            for start, end in ends.items():
                if r["kind"] == end and (r["node"], start) in open_:
                    self._segment(r["node"], open_.pop((r["node"], start)), self.y(r["time_ns"]), styles[start])
        for (node, start), y0 in open_.items():
            self._segment(node, y0, bottom, styles[start])

    def _segment(self, node: str, y0: float, y1: float, style: str) -> None:
        x = self.x(node)
        if x is not None:
            self.out.append(f'<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1}" {style}/>')

    def _message(self, m: _Message) -> None:
        src = m.send or (m.recvs + m.drops)[0]
        sender = m.send["node"] if m.send else src.get("peer")
        x0, y0 = self.x(sender), self.y(src["time_ns"])
        color = self.color(src.get("msg_type"))
        for r in m.recvs:
            x1, y1 = self.x(r["node"]), self.y(r["time_ns"])
            if x0 is None or x1 is None:
                continue
            tip = (f'{src.get("msg_type") or "message"} {sender} -> {r["node"]}, sent {src["time_ns"] / 1e6:.3f} ms, '
                   f'received {r["time_ns"] / 1e6:.3f} ms' + (f', {r["fault"]}' if r.get("fault") else ""))
            dash = ' stroke-dasharray="6,2"' if r.get("fault") else ""
            self.out.append(f'<g><title>{html.escape(tip)}</title><line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" '
                            f'stroke="{color}" stroke-width="1.3" marker-end="url(#arrow)"{dash}/>'
                            f'<text x="{x0 + (x1 - x0) * 0.3}" y="{y0 + (y1 - y0) * 0.3 - 3}" fill="{color}" '
                            f'font-size="9">{html.escape(src.get("msg_type") or "")}</text></g>')
        for r in m.drops:
            x1 = self.x(r.get("peer")) if r["node"] == sender else self.x(r["node"])
            if x0 is None or x1 is None:
                continue
            xm, ym = (x0 + x1) / 2, self.y(r["time_ns"]) + ROW_H / 2
            tip = f'{src.get("msg_type") or "message"} {sender} -> {r.get("peer")} lost ({r.get("fault") or "dropped"})'
            self.out.append(f'<g><title>{html.escape(tip)}</title><line x1="{x0}" y1="{y0}" x2="{xm}" y2="{ym}" '
                            f'stroke="#d62728" stroke-dasharray="4,3"/><text x="{xm}" y="{ym + 4}" fill="#d62728" '
                            f'text-anchor="middle" font-size="13">&#x2715;</text><text x="{xm + 8}" y="{ym - 2}" '
                            f'fill="#d62728" font-size="9">{html.escape(src.get("msg_type") or "")}</text></g>')

    def _event(self, r: dict[str, Any], width: int) -> None:
        y = self.y(r["time_ns"])
        detail = r.get("detail") or r.get("fault") or ""
        if r["node"] == NEMESIS:
            text = f'{r.get("fault") or ""} {detail}'.strip()
            self.out.append(f'<g><title>{html.escape(text)}</title><line x1="{LEFT - 6}" y1="{y}" x2="{width - 20}" '
                            f'y2="{y}" stroke="#d62728" stroke-dasharray="8,4" stroke-opacity="0.6"/>'
                            f'<text x="{width - 24}" y="{y - 3}" text-anchor="end" fill="#d62728">'
                            f'{html.escape(text[:120])}</text></g>')
            return
        x = self.x(r["node"])
        if x is None:
            return
        tip = html.escape(f'{r["kind"]} {r.get("msg_type") or ""} at {r["time_ns"] / 1e6:.3f} ms {detail}'.strip())
        shape = {
            "crash": f'<text x="{x}" y="{y + 5}" text-anchor="middle" fill="#d62728" font-size="16">&#x2716;</text>',
            "restart": f'<circle cx="{x}" cy="{y}" r="5" fill="#2ca02c"/>',
            "pause": f'<rect x="{x - 5}" y="{y - 5}" width="10" height="10" fill="#ff7f0e"/>',
            "resume": f'<rect x="{x - 5}" y="{y - 5}" width="10" height="10" fill="none" stroke="#ff7f0e"/>',
            "error": f'<circle cx="{x}" cy="{y}" r="6" fill="#d62728"/>',
            "command": f'<rect x="{x - 3}" y="{y - 3}" width="6" height="6" fill="#1f77b4"/>',
            "deliver": f'<circle cx="{x}" cy="{y}" r="3.5" fill="#2ca02c"/>',
            "discard": f'<path d="M {x - 4} {y + 3} L {x + 4} {y + 3} L {x} {y - 4} z" fill="#ff7f0e"/>',
            "note": f'<circle cx="{x}" cy="{y}" r="2.5" fill="#777"/>',
        }[r["kind"]]
        label = r.get("msg_type") if r["kind"] in ("note", "deliver", "command", "discard") else r["kind"]
        self.out.append(f'<g><title>{tip}</title>{shape}<text x="{x + 7}" y="{y + 3}" fill="#555" font-size="9">'
                        f'{html.escape(label or "")}</text></g>')

    def _mark(self, r: dict[str, Any], number: int) -> None:
        x, y = self.x(r["node"]), self.y(r["time_ns"])
        if x is None:
            return
        self.out.append(f'<circle cx="{x}" cy="{y}" r="9" fill="#ffd700" fill-opacity="0.35" stroke="#e6a800"/>'
                        f'<text x="{x - 12}" y="{y - 8}" text-anchor="end" fill="#b8860b" font-weight="bold">'
                        f'E{number}</text>')


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:1.5em;max-width:none}} code{{background:#f3f3f3;padding:0 .2em}}
li{{margin:.2em 0}} .note{{color:#666}}</style></head>
<body>
{explanation}
<h2>Space-time diagram</h2>
<p class="note">{note}. Time runs down; each row is a distinct event time. Arrows: messages (dashed: delayed,
duplicated or reordered by a rule); &#x2715;: a lost message; &#x2716;: crash; green dot: restart; orange: pause;
red dashed lines across: partitions and heals; E1, E2, ...: the verdict's evidence. Hover for details.</p>
{svg}
</body></html>
"""


def write_page(path: str, title: str, explanation_html: str, svg: str, note: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(PAGE.format(title=html.escape(title), explanation=explanation_html, svg=svg, note=html.escape(note)))
