"""The pytest plugin (harness/conformance/pytest_plugin.py): a conformance suite runs as pytest
items, failures name their clause, SHOULD failures are xfails unless --zmq-harness-fail-on
should, Allure results carry the labels and the exchange; without --zmq-harness-suite the
plugin collects nothing. Every run is a pytest subprocess in a scratch directory."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
BROKER_DIR = SCENARIOS / "dcp" / "conformance" / "broker"
BROKER_CASES = sorted(p.stem for p in BROKER_DIR.glob("*.yaml"))
# Against the no-pong mutant: one case that fails on dcp.heartbeat.pong, one that passes.
FAILS, PASSES = "ping-pong", "metadata-unmodified"
TWO_CASES = ["--zmq-harness-case", FAILS, "--zmq-harness-case", PASSES]
MUTANT = f"{sys.executable} -m harness.cli node dcp broker --bind {{endpoint}} --mutant {{mutant}}"

# The installed entry points load the plugins; name them where they are not installed or not autoloaded.
_AUTOLOAD = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
_EP = _AUTOLOAD and any(e.name == "zmq_harness" for e in entry_points(group="pytest11"))
PLUGIN = ([] if _EP else ["-p", "harness.conformance.pytest_plugin"]) + \
    ([] if _AUTOLOAD else ["-p", "allure_pytest.plugin"])

BUSY_WORKER_CASE = """\
protocol: dcp
role: broker
case: broker gives a busy worker no second request
clauses: [dcp.broker.one-request-per-worker]
steps:
  - {as: worker.a, send: {type: REGISTER, service: echo}}
  - {as: worker.a, expect: {type: REGISTER}, within: 500ms, clause: dcp.broker.register-confirm}
  - {as: client.c, send: {type: REQUEST, service: echo, data: [one]}}
  - {as: worker.a, expect: {type: REQUEST, data: [one]}, within: 500ms, clause: dcp.broker.route-by-service}
  - {as: client.c, send: {type: REQUEST, service: echo, data: [two]}}
  - {as: worker.a, expect_nothing: {type: REQUEST}, for: 300ms}
"""


def case_clauses(case_id: str) -> list[str]:
    from harness.conformance.case import load_case
    from harness.registry import package

    return load_case(str(BROKER_DIR / f"{case_id}.yaml"), package("dcp").peer_roles()).clauses


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", *args, timeout=120)


def suite_args(*extra: str, suites: Path = SCENARIOS) -> list[str]:
    # `--opt=value`: a bare path argument would also steer pytest's choice of rootdir
    return ["--zmq-harness-suite", "dcp:broker", f"--zmq-harness-suites={suites}", *extra]


@pytest.mark.slow  # the whole broker suite live; test_case_selection runs items through the plugin by default
def test_reference_broker_passes_every_case_each_an_item(pytester: pytest.Pytester) -> None:
    r = run(pytester, *suite_args("--zmq-harness-reference"), "-v")
    r.assert_outcomes(passed=len(BROKER_CASES))
    assert r.ret == 0
    for case in BROKER_CASES:  # one item per case, named by the case id, located at the case file
        r.stdout.fnmatch_lines([f"*scenarios/dcp/conformance/broker/{case}.yaml::{case} PASSED*"])
    r.stdout.fnmatch_lines(["*zmq-harness dcp broker: clause verdicts*", "pass*MUST*dcp.heartbeat.pong*"])


def test_broken_broker_fails_on_the_attributed_clause_with_evidence(pytester: pytest.Pytester) -> None:
    junit = pytester.path / "junit.xml"
    r = run(pytester, *suite_args("--zmq-harness-cmd", MUTANT.replace("{mutant}", "no-pong"), *TWO_CASES),
            f"--junitxml={junit}")
    assert r.ret == 1
    r.assert_outcomes(failed=1, passed=1)
    r.stdout.fnmatch_lines([
        "*_ dcp broker ping-pong _*",
        "[[]dcp.heartbeat.pong MUST[]] worker.a expected PONG within 500 ms*",
        "*clause dcp.heartbeat.pong (MUST*",
        "exchange (decoded*",
        "*-> worker.a*PING*",
        "rerun: pytest *ping-pong.yaml::ping-pong --zmq-harness-suite dcp:broker*--mutant no-pong*",
        "   or: zmq-harness conform dcp broker *--case ping-pong",
    ])
    props = {tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")}
             for tc in ET.parse(junit).getroot().iter("testcase")}
    assert props["ping-pong"]["failed_clause"] == "dcp.heartbeat.pong"
    assert props["ping-pong"]["level"] == "MUST"
    assert props[PASSES]["verdict"] == "pass"


def test_a_should_failure_is_an_xfail_unless_fail_on_should(pytester: pytest.Pytester) -> None:
    suites = pytester.path / "suites"
    case = suites / "dcp" / "conformance" / "broker" / "busy-worker.yaml"
    case.parent.mkdir(parents=True)
    case.write_text(BUSY_WORKER_CASE)
    busy = ["--zmq-harness-cmd", MUTANT.replace("{mutant}", "busy-worker")]
    alluredir = pytester.path / "allure"

    r = run(pytester, *suite_args(*busy, suites=suites), "-rx", f"--alluredir={alluredir}")
    r.assert_outcomes(xfailed=1)
    assert r.ret == 0
    r.stdout.fnmatch_lines(["XFAIL *busy-worker* SHOULD NOT clause broken*dcp.broker.one-request-per-worker*"])
    (result,) = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    assert {(lb["name"], lb["value"]) for lb in result["labels"]} >= {("severity", "normal"), ("level", "SHOULD NOT")}

    r = run(pytester, *suite_args(*busy, "--zmq-harness-fail-on", "should", suites=suites))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["[[]dcp.broker.one-request-per-worker SHOULD NOT[]] worker.a received REQUEST*"])


def test_allure_results_carry_labels_severity_and_the_exchange(pytester: pytest.Pytester) -> None:
    alluredir = pytester.path / "allure"
    run(pytester, *suite_args("--zmq-harness-cmd", MUTANT.replace("{mutant}", "no-pong"), *TWO_CASES),
        f"--alluredir={alluredir}")
    results = {}
    for path in alluredir.glob("*-result.json"):
        res = json.loads(path.read_text())
        labels: dict[str, list[str]] = {}
        for lb in res["labels"]:
            labels.setdefault(lb["name"], []).append(lb["value"])
        results[res["name"].split(":")[0]] = (res, labels)
    assert sorted(results) == sorted([FAILS, PASSES])

    res, labels = results[FAILS]
    assert res["status"] == "failed"
    assert "dcp.heartbeat.pong" in res["statusDetails"]["message"]
    assert labels["protocol"] == ["dcp"] and labels["feature"] == ["dcp"]
    assert labels["role"] == ["broker"] and labels["story"] == ["broker"]
    assert set(labels["clause"]) == set(labels["tag"]) == set(case_clauses(FAILS)) | {"dcp.heartbeat.pong"}
    assert labels["severity"] == ["blocker"]  # a MUST clause
    assert labels["suite"] == ["dcp"] and labels["subSuite"] == ["broker"]
    (exchange,) = [a for a in res["attachments"] if a["name"].startswith("exchange")]
    assert exchange["type"] == "application/json"
    messages = json.loads((alluredir / exchange["source"]).read_text())
    assert messages[-1]["dir"] == "out" and messages[-1]["message"] == "PING"  # and no PONG came back
    assert all({"t_ms", "dir", "peer", "message"} <= set(m) for m in messages)

    res, labels = results[PASSES]
    assert res["status"] == "passed"
    assert set(labels["clause"]) == set(case_clauses(PASSES))
    assert labels["severity"] == ["blocker"]  # its clauses are MUST / MUST NOT
    assert any(a["name"].startswith("exchange") for a in res["attachments"])


def test_case_selection(pytester: pytest.Pytester) -> None:
    r = run(pytester, *suite_args("--zmq-harness-reference", "--zmq-harness-case", "ping-pong"))
    r.assert_outcomes(passed=1)
    r = run(pytester, *suite_args("--zmq-harness-reference", "--zmq-harness-case", "no-such-case"))
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--zmq-harness-case no-such-case: no such case*"])


def test_without_the_suite_option_nothing_is_collected_from_scenarios(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    r = run(pytester, "--collect-only", "-q", f"--zmq-harness-suites={SCENARIOS}", ".", str(SCENARIOS))
    assert r.ret == 0
    assert [line for line in r.outlines if "::" in line] == ["test_plain.py::test_plain"]
    assert ".yaml" not in r.stdout.str()


def test_harness_options_without_a_suite_are_a_usage_error(pytester: pytest.Pytester) -> None:
    r = run(pytester, "--zmq-harness-reference")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--zmq-harness-reference given without --zmq-harness-suite*"])
    r = run(pytester, "--zmq-harness-suite", "dcp:nobody", "--zmq-harness-reference")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*no conformance suite for dcp:nobody*"])
