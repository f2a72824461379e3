"""report.html: one self-contained page (inline CSS, JS and SVG; no external assets).

Every table cell carries its exact value in ``data-value`` next to the text shown, so a reader
(or a test) can check the page against report.json. The script only adds sorting and a filter;
everything is readable with scripts off.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, Sequence

from reports.histogram import ALPHA
from reports.svg import fmt_ns, histogram, verdict_grid

Column = tuple[str, str, str]  # (key, header, kind: text | int | ns | list | verdict)

LAT = [("count", "count", "int"), ("p50", "p50", "ns"), ("p90", "p90", "ns"), ("p99", "p99", "ns"),
       ("max", "max", "ns"), ("min", "min", "ns"), ("mean", "mean", "ns")]
COUNTS = [("total", "total", "int"), ("pass", "pass", "int"), ("fail", "fail", "int"), ("error", "error", "int"),
          ("skipped", "skipped", "int")]
TABLES: dict[str, tuple[str, list[Column], str]] = {
    # path: (title, columns, what it means)
    "chaos.summary": ("Chaos checks over seeds",
                      [("protocol", "protocol", "text"), ("scenario", "scenario", "text"), ("check", "check", "text"),
                       ("clause", "clause", "text"), *COUNTS, ("status", "status", "verdict"),
                       ("failing_seeds", "failing seeds", "list")],
                      "One row per check of a chaos scenario: how many seeds (runs) it passed and failed."),
    "conformance": ("Conformance per implementation × protocol × role × clause",
                    [("implementation", "implementation", "text"), ("protocol", "protocol", "text"),
                     ("role", "role", "text"), ("clause", "clause", "text"), *COUNTS,
                     ("status", "status", "verdict"), ("failing_cases", "failing cases", "list")],
                    "Verdict rows of conformance runs, by the implementation under test and the clause checked."),
    "latency.by_msg_type": ("Latency per message type",
                            [("protocol", "protocol", "text"), ("msg_type", "message", "text"), *LAT],
                            "Send to receipt (same msg_id), every receipt counted, all runs and windows."),
    "latency.by_fault_window": ("Latency per fault window",
                                [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                                 ("window", "window", "text"), *LAT],
                                "Messages grouped by the fault in force when they were sent ('none': no fault)."),
    "latency.by_fault_window_and_msg_type": ("Latency per fault window and message type",
                                             [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                                              ("window", "window", "text"), ("msg_type", "message", "text"), *LAT],
                                             "The table above, split by message type."),
    "latency.by_message_fault": ("Latency per per-message fault",
                                 [("protocol", "protocol", "text"), ("msg_type", "message", "text"),
                                  ("fault", "fault", "text"), *LAT],
                                 "Messages a rule delayed, duplicated or reordered, against untouched ones."),
    "latency.end_to_end": ("End-to-end request latency",
                           [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                            ("command", "command", "text"), *LAT],
                           "Application command to its delivery (same corr), retries included."),
    "latency.end_to_end_by_receiver": ("End-to-end latency per receiver",
                                       [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                                        ("command", "command", "text"), ("node", "node", "text"),
                                        ("delivery", "delivery", "text"), ("topic", "topic / channel", "text"),
                                        *LAT],
                                       "Application command to each delivery with its corr, per node that "
                                       "delivered and topic: a PPPP publish to each subscriber's application, "
                                       "per channel; a Dafka produce to each consumer."),
    "latency.end_to_end_by_fault_window": ("End-to-end latency per fault window",
                                           [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                                            ("window", "window", "text"), *LAT],
                                           "Requests grouped by the fault in force when the command was given."),
    "delivery": ("Message delivery",
                 [("protocol", "protocol", "text"), ("msg_type", "message", "text"), ("sent", "sent", "int"),
                  ("delivered", "delivered", "int"), ("receptions", "receptions", "int"),
                  ("dropped", "dropped", "int"), ("lost", "lost", "int"), ("drop_rows", "drop rows", "int"),
                  ("orphans", "orphan receipts", "int"), ("unpaired", "rows without msg_id", "int")],
                 "sent: send rows; delivered: messages received at least once; receptions: recv rows; dropped: "
                 "never received, with a drop row; lost: neither received nor dropped (in flight at the end, or "
                 "lost without a trace); orphan receipts: recv rows whose send is not in the trace."),
    "requests": ("Application requests",
                 [("protocol", "protocol", "text"), ("scenario", "scenario", "text"), ("command", "command", "text"),
                  ("commands", "commands", "int"), ("answered", "answered", "int"),
                  ("deliveries", "deliveries", "int"), ("unanswered", "unanswered", "int"),
                  ("orphans", "orphan deliveries", "int"), ("unpaired", "rows without corr", "int")],
                 "command rows and their deliver rows by corr."),
    "uncorrelated": ("Commands and deliveries without a correlation id",
                     [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                      ("command", "command / delivery", "text"), ("rows", "rows", "int")],
                     "Operations none of whose rows carries a correlation id, so nothing pairs them: the "
                     "conformance conductor's own rows (case-result: its verdict; output: a line the "
                     "implementation printed), status answers, or a protocol whose workload stamps no id on its "
                     "requests. Counted, not requests that went unanswered."),
    "fault_windows": ("Fault windows",
                      [("protocol", "protocol", "text"), ("scenario", "scenario", "text"),
                       ("window", "window", "text"), ("runs", "runs", "int"), ("segments", "segments", "int"),
                       ("closed_total_ns", "total time (closed)", "ns"), ("open_at_end", "open at end", "int")],
                      "Stretches of time with a fault in force, derived from crash/restart, pause/resume and "
                      "nemesis fault rows."),
    "fault_events": ("Point fault events",
                     [("protocol", "protocol", "text"), ("scenario", "scenario", "text"), ("fault", "fault", "text"),
                      ("count", "count", "int")],
                     "fault rows without a msg_id that open no window."),
    "discards": ("Discarded malformed messages",
                 [("protocol", "protocol", "text"), ("implementation", "implementation", "text"),
                  ("role", "role", "text"), ("clause", "clause", "text"), ("count", "count", "int")],
                 "discard rows: input a node dropped as its specification requires."),
    "failures": ("Failed verdicts",
                 [("protocol", "protocol", "text"), ("scenario", "scenario", "text"), ("seed", "seed", "int"),
                  ("run", "run", "text"), ("node", "node", "text"), ("msg_type", "check / case", "text"),
                  ("clause", "clause", "text"), ("verdict", "verdict", "verdict"), ("detail", "detail", "text")],
                 "Every fail or error verdict (up to 200), with its explanation."),
    "runs": ("Runs", [("protocol", "protocol", "text"), ("scenario", "scenario", "text"), ("runs", "runs", "int"),
                      ("runs_with_verdicts", "with verdicts", "int")],
             "Runs per scenario (runs that wrote at least one verdict or fault row)."),
}

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1em}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#f5f5f5;cursor:pointer;user-select:none}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.v-pass{color:#2e7d32}td.v-fail,td.v-error{color:#c62828;font-weight:bold}td.v-skipped{color:#777}
p.note{color:#555;max-width:70em}#filter{margin:.5em 0;padding:3px;width:20em}
.headline{font-size:1.4em;font-weight:bold;padding:.4em .7em;border-radius:4px;display:inline-block}
.headline.pass{background:#e8f5e9;color:#1b5e20}.headline.fail{background:#ffebee;color:#b71c1c}
p.unknown{font-style:italic}nav#toc ol{margin:.3em 0}h4{font-size:.95em;margin-bottom:.2em}
svg text{font:10px sans-serif}svg .t{font-weight:bold}svg .axis{stroke:#999}svg .bar{fill:#1565c0}
svg .al{fill:#555}
svg .bar.neg{fill:#ef6c00}svg .xl{text-anchor:middle}svg .yl,svg .cl{text-anchor:end}
.plots{display:flex;flex-wrap:wrap;gap:12px}.empty{color:#777;font-style:italic}
"""

JS = """
(function(){
  var summary = JSON.parse(document.getElementById('report-summary').textContent);
  function val(td){var v=td.getAttribute('data-value');var n=parseFloat(v);return (v!==''&&!isNaN(n)&&isFinite(v))?n:v;}
  document.querySelectorAll('table.sortable').forEach(function(table){
    table.querySelectorAll('th').forEach(function(th, i){
      th.addEventListener('click', function(){
        var body=table.tBodies[0], rows=Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute('data-dir')==='asc' ? -1 : 1; th.setAttribute('data-dir', dir>0?'asc':'desc');
        rows.sort(function(a,b){var x=val(a.cells[i]),y=val(b.cells[i]);return (x>y?1:x<y?-1:0)*dir;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  var box=document.getElementById('filter');
  box.addEventListener('input', function(){
    var q=box.value.toLowerCase();
    document.querySelectorAll('table.sortable tbody tr').forEach(function(tr){
      tr.style.display = (!q || tr.textContent.toLowerCase().indexOf(q)>=0) ? '' : 'none';
    });
  });
  var s=document.getElementById('status');
  s.textContent = summary.failing_checks + ' failing chaos check(s), ' + summary.failing_clauses +
    ' failing conformance clause(s), ' + summary.messages + ' message receipt(s) timed.';
  s.className = (summary.failing_checks || summary.failing_clauses) ? 'v-fail' : 'v-pass';
  document.documentElement.setAttribute('data-rendered', 'yes');
})();
"""


def _value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _cell(v: Any, kind: str) -> str:
    raw = _value(v)
    if kind == "ns":
        return f'<td class="num" data-value="{escape(raw)}">{escape(fmt_ns(v))}</td>'
    if kind == "int":
        return f'<td class="num" data-value="{escape(raw)}">{escape(raw)}</td>'
    if kind == "verdict":
        return f'<td class="v-{escape(raw)}" data-value="{escape(raw)}">{escape(raw)}</td>'
    if kind == "list":
        return f'<td data-value="{escape(raw)}">{escape(", ".join(str(x) for x in v or []))}</td>'
    return f'<td data-value="{escape(raw)}">{escape(raw)}</td>'


def table(path: str, rows: Sequence[dict], columns: Sequence[Column] | None = None, attrs: str = "") -> str:
    cols = columns or TABLES[path][1]
    if not rows:
        return f'<p class="empty" data-table-empty="{escape(path)}">No rows.</p>'
    head = "".join(f'<th data-col="{escape(k)}">{escape(h)}</th>' for k, h, _ in cols)
    body = "".join("<tr>" + "".join(_cell(r.get(k), kind).replace("<td", f'<td data-col="{escape(k)}"', 1)
                                    for k, _, kind in cols) + "</tr>" for r in rows)
    return (f'<table class="sortable" data-table="{escape(path)}"{attrs}><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


CLOCKS = (("virtual", "simulation", "Simulated runs (virtual time)",
           "Times are the simulator's virtual nanoseconds: reproducible, and free of the machine's load."),
          ("wall", "live", "Live and conformance runs (wall time)",
           "Times are wall-clock nanoseconds since each run began, over real sockets on this machine. Message "
           "rows carry no id here (real sockets carry no harness id): sends and receipts are counted, not "
           "paired, so message latency is not measured live; end-to-end request latency is (commands and "
           "deliveries are paired by their correlation id). Conformance verdict files are listed here whether "
           "their cases ran live or in the simulator: their verdict rows carry no time."))
UNKNOWN_NOTES = {
    "msg_type": "'?' as message: trace rows that name no message type — receipts the live runtime records "
                "without decoding them (only the receiving node knows what they are).",
    "command": "'?' as command: command or delivery rows that name no operation.",
    "protocol": "'?' as protocol: rows of a trace file that names no protocol.",
    "scenario": "'?' as scenario: rows of a trace file that names no scenario.",
    "window": "'?' as window: a fault window whose fault names nothing.",
}


def _unknown_notes(rows: Sequence[dict], columns: Sequence[Column]) -> str:
    """Why a '?' appears in a table: every one has its explanation next to it."""
    notes = [UNKNOWN_NOTES.get(k, f"'?' as {h}: rows that give no value for it.")
             for k, h, kind in columns if kind == "text" and any(r.get(k) == "?" for r in rows)]
    return "".join(f'<p class="note unknown">{escape(n)}</p>' for n in notes)


def _section(path: str, rows: Sequence[dict], level: str = "h3", clock: str | None = None) -> str:
    title, columns, note = TABLES[path]
    anchor = path if clock is None else f"{clock}-{path}"
    attrs = "" if clock is None else f' data-clock="{escape(clock)}"'
    return (f'<{level} id="{escape(anchor)}">{escape(title)}</{level}><p class="note">{escape(note)}</p>'
            f"{table(path, rows, None, attrs)}{_unknown_notes(rows, columns)}")


def _chaos_runs(runs: Sequence[dict]) -> str:
    """Per scenario: the verdict grid (checks x seeds) and the table of runs."""
    if not runs:
        return '<p class="empty">No chaos runs.</p>'
    by_scenario: dict[tuple, list[dict]] = {}
    for r in runs:
        by_scenario.setdefault((r["clock"], r["protocol"], r["scenario"]), []).append(r)
    out = []
    for (clock, protocol, scenario), rs in sorted(by_scenario.items(), key=lambda kv: tuple(map(str, kv[0]))):
        checks = sorted({c for r in rs for c in r["checks"]})
        grid = verdict_grid(checks, [(r["seed"], r["checks"]) for r in rs], f"{scenario}: verdicts over seeds")
        cols: list[Column] = [("seed", "seed", "int"), ("run", "run", "text"),
                              *[(c, c, "verdict") for c in checks]]
        flat = [{"seed": r["seed"], "run": r["run"], **r["checks"]} for r in rs]
        attrs = f' data-scenario="{escape(str(scenario))}" data-clock="{escape(str(clock))}"'
        out.append(f'<h4 id="runs-{escape(str(clock))}-{escape(str(scenario))}">{escape(str(protocol))} / '
                   f'{escape(str(scenario))}: {len(rs)} run(s), {sum(not r["ok"] for r in rs)} failing</h4>'
                   f'<div class="plots">{grid}</div>'
                   f'<details><summary>table of runs × checks</summary>'
                   f'{table("chaos.runs", flat, cols, attrs)}'
                   f"</details>")
    return "".join(out)


def _plots(report: dict[str, Any], clock: str) -> str:
    time = "virtual" if clock == "virtual" else "wall"
    plots = [histogram(kc, name.split("/", 1)[1], x_label=f"latency, send to receipt ({time} time, log scale)",
                       y_label="receipts") for name, kc in report["histograms"].items() if name.split("/", 1)[0] == clock]
    plots = [p for p in plots if p]
    return f'<div class="plots">{"".join(plots)}</div>' if plots else '<p class="empty">No message latencies.</p>'


def _of(rows: Sequence[dict], clock: str) -> list[dict]:
    return [r for r in rows if r.get("clock") == clock]


def _clock_part(report: dict[str, Any], clock: str, slug: str, title: str, note: str) -> tuple[str, list[str]]:
    """One clock's sections (simulated or live runs), and its table of contents entries."""
    lat = report["latency"]
    runs = _of(report["runs"], clock)
    if not runs and not _of(report["requests"], clock) and not _of(report["delivery"], clock):
        return "", []
    parts = [f'<h2 id="{slug}">{escape(title)}</h2><p class="note">{escape(note)}</p>',
             _section("runs", runs, clock=clock),
             f'<h3 id="{slug}-chaos">Chaos checks</h3>',
             _section("chaos.summary", _of(report["chaos"]["summary"], clock), "h4", clock),
             f'<h4 id="{slug}-grids">Verdicts over seeds</h4>', _chaos_runs(_of(report["chaos"]["runs"], clock)),
             f'<h3 id="{slug}-latency">Latency</h3>',
             f'<p class="note">Percentiles are nearest-rank (the value of rank ⌈q·n⌉) computed from log-spaced '
             f"histograms: each is within {ALPHA:.0%} of the exact value; count, min, max and mean are exact. "
             f"Each cell's exact value in ns is in its data-value attribute.</p>",
             _section("latency.end_to_end", _of(lat["end_to_end"], clock), "h4", clock),
             _section("latency.end_to_end_by_receiver", _of(lat["end_to_end_by_receiver"], clock), "h4", clock),
             _section("latency.end_to_end_by_fault_window", _of(lat["end_to_end_by_fault_window"], clock), "h4", clock),
             f'<h4 id="{slug}-plots">Latency distribution per message type</h4>', _plots(report, clock),
             _section("latency.by_msg_type", _of(lat["by_msg_type"], clock), "h4", clock),
             _section("latency.by_fault_window", _of(lat["by_fault_window"], clock), "h4", clock),
             _section("latency.by_fault_window_and_msg_type", _of(lat["by_fault_window_and_msg_type"], clock), "h4",
                      clock),
             _section("latency.by_message_fault", _of(lat["by_message_fault"], clock), "h4", clock),
             f'<h3 id="{slug}-delivery">Requests and delivery</h3>',
             _section("requests", _of(report["requests"], clock), "h4", clock),
             _section("uncorrelated", _of(report.get("uncorrelated", []), clock), "h4", clock),
             _section("delivery", _of(report["delivery"], clock), "h4", clock),
             f'<h3 id="{slug}-faults">Faults</h3>',
             _section("fault_windows", _of(report["fault_windows"], clock), "h4", clock),
             _section("fault_events", _of(report["fault_events"], clock), "h4", clock)]
    toc = [f'<li><a href="#{slug}">{escape(title)}</a>: <a href="#{slug}-chaos">chaos checks</a>, '
           f'<a href="#{slug}-latency">latency</a>, <a href="#{slug}-delivery">requests and delivery</a>, '
           f'<a href="#{slug}-faults">faults</a></li>']
    return "".join(parts), toc


QUALITY_NOTES = {
    "orphan_receptions": "receipts whose send is not in the traces",
    "unpaired_message_rows": "simulated send/receipt rows without a message id (every simulated one has one)",
    "live_message_rows_not_paired": "live send/receipt rows: real sockets carry no harness message id, so they "
                                    "are counted, not paired (expected)",
    "orphan_deliveries": "deliveries whose command is not in the traces",
    "unpaired_request_rows": "command/delivery rows without a correlation id, of operations whose other rows "
                             "carry one: not paired",
    "uncorrelated_rows": "rows of operations that never carry a correlation id (listed per clock under "
                         "'Commands and deliveries without a correlation id')",
    "runs_without_verdicts": "runs that wrote no verdict (stopped before the checks were judged?)",
    "receipts_of_unnamed_scenarios": "receipts in traces that name no scenario",
    "unreadable_files": "files skipped: not readable as traces (listed below)",
}


def _failing(report: dict[str, Any]) -> tuple[int, int]:
    """Chaos checks and conformance clauses that failed or errored (skipped ones did not)."""
    return (sum(1 for s in report["chaos"]["summary"] if s["status"] == "fail"),
            sum(1 for c in report["conformance"] if c["status"] in ("fail", "error")))


def headline(report: dict[str, Any]) -> tuple[bool, str]:
    """The verdict of the whole trace set: PASS when no chaos check and no conformance clause
    failed or errored (and every file could be read)."""
    checks, clauses = _failing(report)
    unreadable = len(report.get("unreadable_files", []))
    judged = len(report["chaos"]["summary"]) + len(report["conformance"])
    ok = not checks and not clauses and not unreadable
    if ok:
        return True, (f"PASS — all {judged} chaos check(s) and conformance clause(s) held" if judged
                      else "PASS — nothing failed (no verdicts in these traces)")
    why = [f"{checks} failing chaos check(s)" if checks else "", f"{clauses} failing conformance clause(s)"
           if clauses else "", f"{unreadable} unreadable file(s)" if unreadable else ""]
    return False, "FAIL — " + ", ".join(w for w in why if w)


def render(report: dict[str, Any]) -> str:
    checks, clauses = _failing(report)
    summary = {
        "failing_checks": checks,
        "failing_clauses": clauses,
        "messages": sum(r["count"] for r in report["latency"]["by_msg_type"]),
    }
    ok, verdict = headline(report)
    sp = report["spark"]
    clock_parts, toc = [], ['<li><a href="#failures">Failed verdicts</a></li>']
    for clock, slug, title, note in CLOCKS:
        part, entries = _clock_part(report, clock, slug, title, note)
        clock_parts.append(part)
        toc += entries
    toc += ['<li><a href="#conformance">Conformance</a></li>', '<li><a href="#discards">Discarded malformed '
            'messages</a></li>', '<li><a href="#quality">Data quality</a></li>']
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>zmq-harness report: {escape(verdict.split(' — ')[0])} {escape(report['source'])}</title>"
        f"<style>{CSS}</style></head><body>",
        f'<h1>zmq-harness report</h1><p id="verdict" class="headline {"pass" if ok else "fail"}" '
        f'data-verdict="{"pass" if ok else "fail"}">{escape(verdict)}</p>',
        f"<p>Traces: <code>{escape(report['source'])}</code>; generated {escape(report['generated_at'])} by Spark "
        f"{escape(sp['version'])} on <code>{escape(sp['master'])}</code> in {sp['seconds']} s.</p>"
        f'<p id="status"></p>',
        f'<nav id="toc"><h2>Contents</h2><ol>{"".join(toc)}</ol></nav>',
        '<input id="filter" type="search" placeholder="filter rows (any text)">',
        '<h2 id="failures-section">Failures</h2>', _section("failures", report["failures"]),
        *clock_parts,
        '<h2 id="conformance-section">Conformance</h2>', _section("conformance", report["conformance"]),
        '<h2 id="discards-section">Discards</h2>', _section("discards", report["discards"]),
        '<h2 id="quality">Data quality</h2><ul>',
        "".join(f"<li data-quality=\"{escape(k)}\">{escape(k.replace('_', ' '))}: {escape(_value(v) or '0')}"
                f"{' — ' + escape(QUALITY_NOTES[k]) if k in QUALITY_NOTES else ''}</li>"
                for k, v in report["data_quality"].items()),
        "</ul>",
        "".join(f"<p class=\"unreadable\">skipped {escape(u['file'])}: {escape(u['reason'])}</p>"
                for u in report.get("unreadable_files", [])),
        f'<script type="application/json" id="report-summary">{json.dumps(summary)}</script>',
        f"<script>{JS}</script></body></html>",
    ]
    return "".join(parts)
