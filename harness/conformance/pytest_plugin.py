"""pytest plugin: a conformance suite as pytest tests, and as Allure tests when allure-pytest
is active. Registered through the ``pytest11`` entry point ``zmq_harness``; documented in
docs/conformance-pytest.md.

    pytest --zmq-harness-suite dcp:broker --zmq-harness-cmd "mybroker --bind {endpoint}"

Every case of the suite becomes one pytest item named by the case id, located at its case
file, that runs the case over real sockets against a fresh instance of the implementation
(or against ``--zmq-harness-endpoint``). Verdicts map to pytest outcomes:

* pass -> passed; skipped (the case is not for this dialect) -> skipped;
* fail on a MUST / MUST NOT clause -> failed (the report names the clause, its level, the
  reason, the decoded exchange and the commands that rerun the case);
* fail on a SHOULD / SHOULD NOT clause -> xfailed, or failed with ``--zmq-harness-fail-on
  should``; fail on a MAY clause -> always xfailed (the same rule as ``zmq-harness conform``'s
  exit status);
* error (the harness could not judge: the implementation did not start, the case did not
  finish) -> failed with a non-assertion exception, which Allure shows as "broken".

Without ``--zmq-harness-suite`` the plugin does nothing: it adds options and no more (and
imports nothing of the harness beyond this module).
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.conformance import START_TIMEOUT_S
from harness.conformance.exchange_log import ARROWS

if TYPE_CHECKING:
    from harness.conformance.case import Case
    from harness.conformance.runner import CaseResult
    from harness.packages.base import RoleSuite

MARKER = "zmq_harness"
ADVISORY = ("SHOULD", "SHOULD NOT")
EXCHANGE_SHOWN = 30  # messages of the exchange printed in a failure report (all are attached to Allure)


# ---- options and settings -------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("zmq-harness", "zmq-harness conformance suite (docs/conformance-pytest.md)")
    g.addoption("--zmq-harness-suite", metavar="PROTOCOL:ROLE",
                help="collect this conformance suite's cases as tests, e.g. dcp:broker")
    g.addoption("--zmq-harness-cmd", metavar="CMD",
                help="command line of the implementation, started fresh for every case; placeholders such as "
                     "{endpoint}, {port}, {dialect}, {python} are filled, e.g. \"mybroker --bind {endpoint}\"")
    g.addoption("--zmq-harness-endpoint", metavar="ENDPOINT",
                help="endpoint of an implementation that is already running (shared by all cases)")
    g.addoption("--zmq-harness-reference", action="store_true", default=False,
                help="test the reference node of the role, run as a subprocess")
    g.addoption("--zmq-harness-dialect", default="strict", metavar="DIALECT",
                help="wire dialect: strict (default) or a deployed one, e.g. dcp:dagbox")
    g.addoption("--zmq-harness-case", action="append", default=[], metavar="CASE",
                help="run only this case (id or name; repeatable)")
    g.addoption("--zmq-harness-fail-on", choices=("must", "should"), default="must",
                help="must (default): a SHOULD failure is an xfail; should: it fails the test")
    g.addoption("--zmq-harness-start-timeout", type=float, default=START_TIMEOUT_S, metavar="SECONDS",
                help="how long the implementation may take to start, per case (default 15)")
    g.addoption("--zmq-harness-suites", default="scenarios", metavar="DIR",
                help="directory holding <protocol>/conformance/<role>/*.yaml (default: scenarios)")


@dataclass
class Settings:
    protocol: str
    role: str
    suite: RoleSuite
    cmd: str | None
    endpoint: str | None
    reference: bool
    dialect: str
    only: list[str]
    fail_on: str
    root: Path  # the suites directory, absolute
    case_paths: list[Path]  # the suite's case files, absolute
    pytest_args: str  # options that reproduce this selection, for the rerun command
    cli_base: str  # `zmq-harness conform ...` equivalent, for the rerun command
    implementation: str
    invocation_dir: Path
    native: bool = False  # some case file was collected by pytest itself (given as an argument)
    start_timeout: float = START_TIMEOUT_S  # seconds the implementation may take to start, per case
    matched: set[str] = field(default_factory=set)  # --zmq-harness-case values that matched a case
    results: list[CaseResult] = field(default_factory=list)
    index: int = 0


SETTINGS = pytest.StashKey[Settings]()


def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption("zmq_harness_suite")
    given = {"--zmq-harness-cmd": config.getoption("zmq_harness_cmd"),
             "--zmq-harness-endpoint": config.getoption("zmq_harness_endpoint"),
             "--zmq-harness-reference": config.getoption("zmq_harness_reference")}
    if not spec:
        stray = [k for k, v in given.items() if v] + (["--zmq-harness-case"] if config.getoption("zmq_harness_case")
                                                      else [])
        if stray:
            raise pytest.UsageError(f"{', '.join(stray)} given without --zmq-harness-suite PROTOCOL:ROLE")
        return
    config.stash[SETTINGS] = _settings(config, spec, given)
    config.addinivalue_line("markers", f"{MARKER}(protocol, role, clauses): a zmq-harness conformance case "
                                       "(added by the zmq-harness plugin)")


def _settings(config: pytest.Config, spec: str, given: dict[str, Any]) -> Settings:
    from harness.protocols import codec
    from harness.registry import suite, suites

    protocol, sep, role = spec.partition(":")
    if not sep:
        have = ", ".join(f"{p}:{r}" for p, r in suites())
        raise pytest.UsageError(f"--zmq-harness-suite takes PROTOCOL:ROLE, e.g. dcp:broker (suites: {have})")
    try:
        rs = suite(protocol, role)
    except KeyError as e:
        raise pytest.UsageError(f"--zmq-harness-suite: {e.args[0]}") from None
    chosen = [k for k, v in given.items() if v]
    if len(chosen) != 1:
        raise pytest.UsageError("--zmq-harness-suite needs exactly one of --zmq-harness-cmd, --zmq-harness-endpoint, "
                                "--zmq-harness-reference" + (f" (given: {', '.join(chosen)})" if chosen else ""))
    dialect = config.getoption("zmq_harness_dialect")
    try:
        codec(protocol, dialect)
    except KeyError as e:
        raise pytest.UsageError(f"--zmq-harness-dialect: {e.args[0]}") from None
    inv = config.invocation_params.dir
    root_opt = config.getoption("zmq_harness_suites")
    root = (inv / root_opt).resolve()
    paths = [Path(p).resolve() for p in rs.case_paths(str(root))]
    if not paths:
        raise pytest.UsageError(f"--zmq-harness-suite {spec}: no case files in {rs.cases_dir(str(root))}")
    cmd, endpoint, reference = given["--zmq-harness-cmd"], given["--zmq-harness-endpoint"], \
        given["--zmq-harness-reference"]
    fail_on = config.getoption("zmq_harness_fail_on")

    args = [f"--zmq-harness-suite {spec}"]
    cli = [f"zmq-harness conform {protocol} {role} --dialect {dialect}"]
    if root_opt != "scenarios":
        args.append(f"--zmq-harness-suites={shlex.quote(root_opt)}")
    if cmd:
        args.append(f"--zmq-harness-cmd {shlex.quote(cmd)}")
        cli.append(f"--cmd {shlex.quote(cmd)}")
    elif endpoint:
        args.append(f"--zmq-harness-endpoint {shlex.quote(endpoint)}")
        cli.append(f"--endpoint {shlex.quote(endpoint)}")
    else:
        args.append("--zmq-harness-reference")
        cli.append("--reference")
    if dialect != "strict":
        args.append(f"--zmq-harness-dialect {shlex.quote(dialect)}")
    if fail_on != "must":
        args.append(f"--zmq-harness-fail-on {fail_on}")
    start_timeout = float(config.getoption("zmq_harness_start_timeout"))
    if not start_timeout > 0:
        raise pytest.UsageError(f"--zmq-harness-start-timeout: {start_timeout:g} is not a positive number of seconds")
    if start_timeout != START_TIMEOUT_S:
        args.append(f"--zmq-harness-start-timeout {start_timeout:g}")
        cli.append(f"--start-timeout {start_timeout:g}")
    if root_opt != "scenarios":
        cli.append(f"--suites {shlex.quote(root_opt)}")
    return Settings(protocol, role, rs, cmd or (rs.reference_cmd if reference else None), endpoint, bool(reference),
                    dialect, list(config.getoption("zmq_harness_case")), fail_on, root, paths, " ".join(args),
                    " ".join(cli), "reference" if reference else (cmd or endpoint), inv, start_timeout=start_timeout)


# ---- collection -----------------------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> CaseFile | None:
    """A case file of the selected suite given to pytest (or found under a path given to it)."""
    s = parent.config.stash.get(SETTINGS, None)
    if s is None or file_path.suffix not in (".yaml", ".yml") or file_path.resolve() not in s.case_paths:
        return None
    s.native = True
    return CaseFile.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)  # before -k / -m / --lf / Allure selection, so they apply to the cases
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """When pytest's own collection met no case file of the suite (the usual case: the cases live
    outside the test paths), add the whole suite."""
    s = config.stash.get(SETTINGS, None)
    if s is None or s.native:
        return
    errors_before = session.testsfailed
    for path in s.case_paths:
        kw: dict[str, Any] = {}
        if not path.is_relative_to(config.rootpath):  # pytest would give it a bare file name as node id
            kw["name"] = kw["nodeid"] = _display_path(path, s)
        node = CaseFile.from_parent(session, path=path, **kw)
        items.extend(session.genitems(node))
    unknown = [c for c in s.only if c not in s.matched]
    if unknown and session.testsfailed == errors_before:
        raise pytest.UsageError(f"--zmq-harness-case {', '.join(unknown)}: no such case in "
                                f"{s.suite.cases_dir(str(s.root))}")


def _shown(path: str | Path, base: Path | None = None) -> str:
    """A path as the user would type it: relative to ``base`` (where pytest was run) when under it."""
    p, base = Path(path).resolve(), (base or Path.cwd()).resolve()
    return p.relative_to(base).as_posix() if p.is_relative_to(base) else p.as_posix()


def _display_path(path: Path, s: Settings) -> str:
    for base in (s.invocation_dir, s.root.parent):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return path.as_posix()


class CaseFile(pytest.File):
    """One case file: yields its case (none when --zmq-harness-case leaves it out)."""

    def collect(self) -> list[CaseItem]:
        from harness.conformance.case import CaseError, load_case
        from harness.registry import package

        s = self.config.stash[SETTINGS]
        case = load_case(str(self.path), package(s.protocol).peer_roles())
        if (case.protocol, case.role) != (s.protocol, s.role):
            raise CaseError(str(self.path), None, ("role",),
                            f"a {case.protocol}:{case.role} case in the {s.protocol}:{s.role} suite")
        if s.only:
            hit = [c for c in s.only if c in (case.id, case.name)]
            if not hit:
                return []
            s.matched.update(hit)
        s.index += 1
        return [CaseItem.from_parent(self, name=case.id, case=case, index=s.index)]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        from harness.conformance.case import CaseError

        if isinstance(excinfo.value, CaseError):
            return f"invalid conformance case: {excinfo.value}"
        return super().repr_failure(excinfo)


# ---- running a case ---------------------------------------------------------------------------


class ConformanceFailure(AssertionError):
    """The implementation broke a clause (counted as a test failure)."""


class ConformanceError(Exception):
    """The harness could not judge the case (the implementation did not start, the case did not
    finish): not an assertion, so Allure reports the test as broken rather than failed."""


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, index: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self.index = index
        self.result: CaseResult | None = None
        self.add_marker(getattr(pytest.mark, MARKER)(protocol=case.protocol, role=case.role,
                                                     clauses=tuple(case.clauses)))
        self.extra_keyword_matches.update(case.clauses)

    @property
    def settings(self) -> Settings:
        return self.config.stash[SETTINGS]

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.case.protocol} {self.case.role} {self.case.id}"

    def rerun_pytest(self) -> str:
        s = self.settings
        return f"pytest {shlex.quote(f'{_shown(self.path, s.invocation_dir)}::{self.case.id}')} {s.pytest_args}"

    def runtest(self) -> None:
        from harness.conformance.runner import run_case_live

        s = self.settings
        _allure_labels(self)
        result = None
        try:
            result = run_case_live(self.case, cmd=s.cmd, endpoint=s.endpoint, dialect=s.dialect,
                                   tag=f"-{self.index}" if s.endpoint else "", rerun_base=s.cli_base,
                                   start_timeout=s.start_timeout)
        finally:
            _allure_result(self, result)
        self.result = result
        s.results.append(result)
        level = _level(result)
        self.user_properties.extend([("verdict", result.verdict)] + [("clause", c) for c in self.case.clauses])
        if result.verdict in ("fail", "error"):
            self.user_properties.extend([("failed_clause", result.clause), ("level", level)])
        headline = f"[{result.clause} {level or '?'}] {result.reason}"
        if result.verdict == "pass":
            return
        if result.verdict == "skipped":
            raise _skip_at_case_file(result.reason)
        if result.verdict == "error":
            raise ConformanceError(headline)
        if level in ADVISORY + ("MAY",) and not (level in ADVISORY and s.fail_on == "should"):
            pytest.xfail(f"{level} clause broken (fails with --zmq-harness-fail-on should): {headline}"
                         if level in ADVISORY else f"MAY clause broken: {headline}")
        raise ConformanceFailure(headline)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (ConformanceFailure, ConformanceError)) and self.result is not None:
            return format_result(self.result, self.rerun_pytest(), self.settings.invocation_dir)
        return super().repr_failure(excinfo)


def _skip_at_case_file(reason: str) -> BaseException:
    """A skip that pytest reports at the case file rather than at this module's line."""
    try:
        return pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without the (private) keyword
        return pytest.skip.Exception(reason)


def _level(result: CaseResult) -> str:
    from harness.conformance.report import level_of

    lv = level_of(result.case.protocol, result.clause) if result.clause else None
    return lv.value if lv else ""


def format_result(r: CaseResult, rerun_pytest: str = "", base: Path | None = None) -> str:
    """A failed or errored case, as a pytest failure report shows it."""
    from harness.protocols import catalogue

    case = r.case
    cat = catalogue(case.protocol)
    level = _level(r)
    word = "failed" if r.verdict == "fail" else "not judged (harness error)"
    lines = [f"[{r.clause} {level or '?'}] {r.reason}",
             f"  {case.protocol} {case.role} case {case.id} ({case.name}): {word}"]
    if r.step_line:
        lines.append(f"  at {_shown(case.path, base)}:{r.step_line}")
    if r.clause in cat:
        c = cat[r.clause]
        lines.append(f"  clause {c.id} ({c.level.value}, section \"{c.section}\"): {c.text}")
    lines.append(f"  clauses of the case: {', '.join(case.clauses)}")
    if r.exchange:
        lines.append("exchange (decoded; -> sent by the harness, <- sent by the implementation):")
        shown = r.exchange[-EXCHANGE_SHOWN:]
        if len(r.exchange) > len(shown):
            lines.append(f"  ... {len(r.exchange) - len(shown)} earlier message(s)")
        for e in shown:
            arrow = ARROWS.get(e.get("dir", ""), "<-")
            body = e.get("fields") if "fields" in e else e.get("frames")
            extra = f"  ({e['error']})" if e.get("error") else ""
            lines.append(f"  {e.get('t_ms', 0):>9.3f} ms {arrow} {e.get('peer', ''):<10} {e.get('message', '')} "
                         f"{json.dumps(body, default=str)[:300]}{extra}")
    else:
        lines.append("exchange: (no message was exchanged)")
    if r.iut_output:
        lines.append("implementation output (last lines):")
        lines.extend(f"  | {line}" for line in r.iut_output.splitlines()[-20:])
    if rerun_pytest:
        lines.append(f"rerun: {rerun_pytest}")
    if r.rerun:
        lines.append(f"   or: {r.rerun}")
    return "\n".join(lines)


# ---- Allure -------------------------------------------------------------------------------------


def _allure() -> Any:
    try:
        import allure
    except ImportError:  # allure-pytest is a dependency, but the plugin works without it
        return None
    return allure


def _allure_labels(item: CaseItem) -> None:
    """Labels known before the case runs (all no-ops unless allure-pytest is reporting)."""
    allure = _allure()
    if allure is None:
        return
    case, s = item.case, item.settings
    d = allure.dynamic
    d.title(f"{case.id}: {case.name}")
    d.feature(case.protocol)
    d.story(case.role)
    d.label("protocol", case.protocol)
    d.label("role", case.role)
    d.label("clause", *case.clauses)
    d.tag(*case.clauses)
    d.parent_suite("zmq-harness conformance")
    d.suite(case.protocol)
    d.sub_suite(case.role)
    d.parameter("dialect", s.dialect)
    d.parameter("implementation", s.implementation)


def _allure_result(item: CaseItem, r: CaseResult | None) -> None:
    """Severity, description and evidence, once the verdict is known (or the run raised)."""
    allure = _allure()
    if allure is None:
        return
    from harness.protocols import catalogue
    from harness.protocols.clauses import Level

    case = item.case
    cat = catalogue(case.protocol)
    if r is not None and r.verdict in ("fail", "error") and r.clause in cat:
        level = cat[r.clause].level  # the level of the clause the failure is attributed to
        if r.clause not in case.clauses:
            allure.dynamic.label("clause", r.clause)
            allure.dynamic.tag(r.clause)
    else:  # the strongest level among the case's clauses (Level lists them strongest first)
        level = min((cat[c].level for c in case.clauses if c in cat), key=list(Level).index)
    allure.dynamic.severity(allure.severity_level(level.severity))
    allure.dynamic.label("level", level.value)
    allure.dynamic.description(_description(item, r, cat))
    if r is not None and r.exchange:
        allure.attach(json.dumps(r.exchange, indent=1, default=str), name="exchange (decoded)",
                      attachment_type=allure.attachment_type.JSON)
    if r is not None and r.iut_output:
        allure.attach(r.iut_output, name="implementation output", attachment_type=allure.attachment_type.TEXT)
    if os.path.exists(case.path):
        allure.attach.file(case.path, name="case file", attachment_type=allure.attachment_type.YAML)


def _description(item: CaseItem, r: CaseResult | None, cat: Any) -> str:
    case = item.case
    where = _shown(case.path, item.settings.invocation_dir)
    lines = [f"**{case.name}** — `{case.protocol}` `{case.role}` case `{case.id}` ({where})", ""]
    if case.description:
        lines += [case.description, ""]
    lines += ["| clause | level | statement |", "|---|---|---|"]
    for c in case.clauses:
        if c in cat:
            lines.append(f"| `{c}` | {cat[c].level.value} | {cat[c].text.replace('|', '/')} |")
    lines.append("")
    if r is not None and r.verdict != "pass":
        level = _level(r)
        lines.append(f"**Verdict: {r.verdict}**" + (f" on `{r.clause}` ({level})" if r.clause else "")
                     + f": {r.reason}")
        lines.append("")
    if r is not None and r.verdict in ("fail", "error"):
        lines.append(f"Rerun: `{item.rerun_pytest()}`" + (f" or `{r.rerun}`" if r.rerun else ""))
    return "\n".join(lines)


# ---- summary ------------------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    s = config.stash.get(SETTINGS, None)
    if s is None or not s.results:
        return
    from harness.conformance.report import clause_verdicts, coverage
    from harness.protocols import catalogue

    cat = catalogue(s.protocol)
    tr = terminalreporter
    tr.section(f"zmq-harness {s.protocol} {s.role}: clause verdicts", sep="-")
    verdicts = clause_verdicts(s.results)
    for clause in sorted(verdicts, key=lambda c: (verdicts[c][0] not in ("fail", "error"), c)):
        v, cases = verdicts[clause]
        level = cat[clause].level.value if clause in cat else "?"
        tr.write_line(f"{v:<10} {level:<10} {clause}  ({', '.join(cases)})")
    covered, missing = coverage(s.protocol, s.role, s.results)
    tr.write_line(f"coverage: {len(covered)}/{len(covered) + len(missing)} wire/timing clauses for the {s.role} "
                  "role have a case")
