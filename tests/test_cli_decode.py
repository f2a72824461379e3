"""`zmq-harness decode` as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "zmq-harness"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=60)


def test_decodes_a_request_with_empty_frames_given_as_empty_arguments() -> None:
    r = run("decode", "dcp", "", "4447425801", "04", "6563686f", "", "72657131", "", "68656c6c6f")
    assert r.returncode == 0, r.stderr
    assert "dcp REQUEST (strict, 8 frame(s))" in r.stdout
    assert 'service: "echo"' in r.stdout
    assert 'metadata: ["req1"]' in r.stdout
    assert 'data: ["hello"]' in r.stdout


def test_malformed_message_prints_the_error_and_exits_1() -> None:
    r = run("decode", "dcp", "", "4447425802", "02")
    assert r.returncode == 1
    assert "PING.version" in r.stdout and "dcp.wire.version" in r.stdout


def test_dialect_only_bytes_are_a_conformance_error_in_strict_and_fine_in_the_dialect() -> None:
    frames = ["", "4447425801", "02000000"]
    strict = run("decode", "dcp", *frames)
    assert strict.returncode == 1 and "valid only in dialect dcp:dagbox" in strict.stdout
    dialect = run("decode", "dcp", "--dialect", "dcp:dagbox", *frames)
    assert dialect.returncode == 0 and "dcp PING (dcp:dagbox" in dialect.stdout


def test_json_output_and_hex_spellings() -> None:
    r = run("decode", "dcp", "--json", "", "0x44 47 42 58 01", "03")
    assert r.returncode == 0
    assert json.loads(r.stdout) == {"protocol": "dcp", "dialect": "strict", "message": "PONG", "fields": {"version": 1}}
    bad = run("decode", "dcp", "--json", "", "4447425801")
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["clause"] == "dcp.wire.message-type"


def test_bad_hex_and_unknown_dialect_are_usage_errors() -> None:
    r = run("decode", "dcp", "zz")
    assert r.returncode not in (0, 1) and "not hex" in r.stderr
    r = run("decode", "dcp", "--dialect", "nope", "")
    assert r.returncode == 2 and "no dialect" in r.stderr
