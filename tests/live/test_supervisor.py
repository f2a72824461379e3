"""The supervisor with real subprocesses: readiness, early exit, timeouts, signals, reaping."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.live import supervisor as sup
from harness.live.supervisor import (
    ManagedProcess, PlaceholderError, ProcessExitedEarly, ReadyDelay, ReadyLine, ReadyPort,
    LOWEST_PORT, ReadyTimeout, Supervisor, ephemeral_range, fill_placeholders, free_port,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(30)]

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STANDALONE = os.path.join(HERE, "standalone_echo.py")


def py(code: str) -> list[str]:
    return [PY, "-c", code]


def proc_state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def assert_reaped(pid: int) -> None:
    """Our direct child: gone, and no zombie of ours left to wait for."""
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert proc_state(pid) is None


def assert_dead(pid: int, within: float = 3.0) -> None:
    """Someone else's child (reparented): gone or a zombie for its new parent to reap."""
    deadline = time.monotonic() + within
    while proc_state(pid) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc_state(pid) in (None, "Z"), proc_state(pid)


@pytest.fixture(autouse=True)
def nothing_left_running(no_thread_leak: None) -> Any:
    yield
    left = sup.running_processes()
    sup.reap_all()
    assert not left, f"test left processes running: {left}"


# ---- placeholders and ports --------------------------------------------------------------------


def test_fill_placeholders() -> None:
    args = fill_placeholders(
        "impl --bind tcp://127.0.0.1:{port} --peer {endpoint} --name '{name}' --json '{{\"a\": 1}}'",
        {"port": 5555, "endpoint": "tcp://127.0.0.1:6000", "name": "two words"},
    )
    assert args == ["impl", "--bind", "tcp://127.0.0.1:5555", "--peer", "tcp://127.0.0.1:6000",
                    "--name", "two words", "--json", '{"a": 1}']
    assert fill_placeholders(["x", "{port2}"], {"port2": 7}) == ["x", "7"]


def test_unknown_placeholders_are_all_named() -> None:
    with pytest.raises(PlaceholderError) as info:
        fill_placeholders("impl {port} {prot} {endpiont} {prot}", {"port": 1, "endpoint": "e"})
    msg = str(info.value)
    assert "{prot}, {endpiont}" in msg and "known: {port}, {endpoint}" in msg


@pytest.mark.parametrize("cmd", ["impl {a b}", "impl {}", "impl {0}", "awk {print}x}", "impl }", ""])
def test_malformed_placeholders_and_empty_command(cmd: str) -> None:
    with pytest.raises(PlaceholderError):
        fill_placeholders(cmd, {})


def test_free_port_is_bindable_on_loopback() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_free_port_can_reserve_consecutive_ports() -> None:
    first = free_port(count=3)
    for port in (first, first + 1, first + 2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    assert not {first, first + 1, first + 2} & {free_port() for _ in range(100)}


def test_free_ports_are_distinct_and_outside_the_range_outgoing_connections_take() -> None:
    # Outgoing connections get their local port from the ephemeral range: a port picked there
    # could be taken by a peer's connect before the implementation under test binds it.
    lo, hi = ephemeral_range()
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == 300
    if lo - LOWEST_PORT >= 1000:
        assert all(LOWEST_PORT <= p < lo for p in ports)


def test_free_port_skips_a_port_someone_holds_and_one_already_handed_out(monkeypatch: Any) -> None:
    lo, _ = ephemeral_range()
    if lo - LOWEST_PORT < 1000:
        pytest.skip("no room below the ephemeral range on this machine")
    handed = free_port()
    with socket.socket() as held:
        for candidate in range(LOWEST_PORT, lo):
            try:
                held.bind(("127.0.0.1", candidate))
                break
            except OSError:
                continue
        picks = [candidate, handed, candidate]
        seen: list[int] = []

        class Scripted:  # the held port, the handed one, the held one again, then any
            def randrange(self, a: int, b: int) -> int:
                seen.append(picks.pop(0) if picks else random.Random(len(seen)).randrange(a, b))
                return seen[-1]

        monkeypatch.setattr(sup, "_PORT_RNG", Scripted())
        port = free_port()
    assert seen[:3] == [candidate, handed, candidate] and port == seen[-1]
    assert port not in (candidate, handed) and LOWEST_PORT <= port < lo


# ---- readiness ---------------------------------------------------------------------------------


def test_ready_line_from_a_standalone_node_and_graceful_stop(tmp_path: Any) -> None:
    log = str(tmp_path / "echo.log")
    proc = ManagedProcess([PY, STANDALONE], ready=ReadyLine(r"^READY echo (\S+)", "stdout"),
                          log_path=log)
    with proc:
        assert proc.ready_match is not None
        assert proc.ready_match.group(1).startswith("tcp://127.0.0.1:")
        pid = proc.pid
    assert proc.returncode == 0  # SIGTERM -> run_standalone shuts down cleanly
    assert_reaped(pid)  # type: ignore[arg-type]
    assert "READY echo" in proc.output("stdout")
    with open(log) as f:
        assert "[stdout] READY echo" in f.read()


def test_ready_port() -> None:
    port = free_port()
    code = (
        "import socket, time; time.sleep(0.3); s = socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"
    )
    t0 = time.monotonic()
    with ManagedProcess(py(code), ready=ReadyPort(port, timeout=10)) as proc:
        assert time.monotonic() - t0 >= 0.3 and proc.running
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_ready_port_waits_for_every_port_of_a_row() -> None:
    # An Event BUS server binds P, P+1, P+2, maybe one after another: ready once the last is up.
    port = free_port(count=3)
    code = (
        "import socket, time\nheld = []\n"
        f"for p in ({port + 2}, {port}, {port + 1}):\n"
        "    time.sleep(0.3); s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "    s.bind(('127.0.0.1', p)); s.listen(); held.append(s)\n"
        "time.sleep(60)"
    )
    t0 = time.monotonic()
    with ManagedProcess(py(code), ready=ReadyPort(port, timeout=10, count=3)) as proc:
        assert time.monotonic() - t0 >= 0.9 and proc.running
        for p in (port, port + 1, port + 2):
            socket.create_connection(("127.0.0.1", p), timeout=1).close()


def test_ready_delay_and_placeholders_in_start() -> None:
    with Supervisor() as s:
        proc = s.start(py("import sys, time; print(sys.argv[1:], flush=True); time.sleep(60)") +
                       ["{port}"], values={"port": 4242}, ready=ReadyDelay(0.2))
        assert proc.running
        deadline = time.monotonic() + 5
        while "4242" not in proc.output() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "['4242']" in proc.output("stdout")
    assert proc.returncode == -signal.SIGTERM


@pytest.mark.parametrize("ready", [
    ReadyLine("READY", timeout=10), ReadyPort(1, timeout=10), ReadyDelay(5)],
    ids=["line", "port", "delay"])
def test_early_exit_is_a_clear_error(ready: Any) -> None:
    code = "import sys; print('loading config', flush=True); sys.stderr.write('bad config\\n'); sys.exit(3)"
    t0 = time.monotonic()
    with pytest.raises(ProcessExitedEarly) as info:
        ManagedProcess(py(code), ready=ready, name="impl").start()
    assert time.monotonic() - t0 < 4  # noticed the exit, did not sit out the timeout
    msg = str(info.value)
    assert "impl: exited with code 3" in msg and "bad config" in msg and "loading config" in msg


def test_not_ready_in_time_kills_and_reaps() -> None:
    proc = ManagedProcess(py("print('starting up', flush=True); import time; time.sleep(60)"),
                          ready=ReadyLine("READY", timeout=0.5))
    t0 = time.monotonic()
    with pytest.raises(ReadyTimeout, match="(?s)within 0.5s.*starting up"):
        proc.start()
    assert time.monotonic() - t0 < 3
    assert not proc.running and proc.returncode == -signal.SIGKILL
    assert_reaped(proc.pid)  # type: ignore[arg-type]


def test_port_not_ready_in_time() -> None:
    with pytest.raises(ReadyTimeout, match="not accepting connections"):
        ManagedProcess(py("import time; time.sleep(60)"),
                       ready=ReadyPort(free_port(), timeout=0.3)).start()


def test_cannot_start_missing_binary() -> None:
    with pytest.raises(sup.SupervisorError, match="cannot start"):
        ManagedProcess(["/nonexistent/impl"]).start()


# ---- signals and reaping -----------------------------------------------------------------------


IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_stop_escalates_to_sigkill_after_grace() -> None:
    proc = ManagedProcess(py(IGNORES_TERM), ready=ReadyLine("ready")).start()
    t0 = time.monotonic()
    code = proc.stop(grace=0.4)
    elapsed = time.monotonic() - t0
    assert code == -signal.SIGKILL and 0.4 <= elapsed < 3
    assert_reaped(proc.pid)  # type: ignore[arg-type]


def test_stop_kills_the_whole_process_group() -> None:
    # The shell's child ignores SIGTERM and outlives the shell: only the group sweep gets it.
    script = "trap '' TERM; sleep 60 & echo child $!; exec sleep 60"
    proc = ManagedProcess(["sh", "-c", script], ready=ReadyLine(r"child (\d+)")).start()
    assert proc.ready_match is not None
    child = int(proc.ready_match.group(1))
    assert proc_state(child) not in (None, "Z")
    proc.stop(grace=0.3)
    assert_dead(child)
    assert_reaped(proc.pid)  # type: ignore[arg-type]


def test_pause_resume_restart_kill() -> None:
    ticker = "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.02)"
    proc = ManagedProcess(py(ticker), ready=ReadyLine("tick")).start()
    try:
        proc.pause()
        time.sleep(0.1)
        assert proc_state(proc.pid) == "T"  # type: ignore[arg-type]
        before = proc.buffer.count
        time.sleep(0.2)
        assert proc.buffer.count == before
        proc.resume()
        deadline = time.monotonic() + 5
        while proc.buffer.count == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.buffer.count > before

        proc.pause()  # stop() must work on a paused process too
        old = proc.pid
        proc.restart(grace=1.0)
        assert proc.pid != old and proc.running
        assert_reaped(old)  # type: ignore[arg-type]
        assert proc.kill() == -signal.SIGKILL
        assert proc.kill() == -signal.SIGKILL  # idempotent
        with pytest.raises(sup.SupervisorError, match="not running"):
            proc.pause()
    finally:
        proc.kill()


def test_supervisor_stops_all_and_writes_logs(tmp_path: Any) -> None:
    with Supervisor(log_dir=str(tmp_path)) as s:
        a = s.start(py("import time; print('a up', flush=True); time.sleep(60)"), ready=ReadyLine("up"))
        b = s.start(py(IGNORES_TERM), ready=ReadyLine("ready"), name="stubborn")
        s_pids = [a.pid, b.pid]
        s.stop_all(grace=0.2)
    assert not a.running and not b.running
    for pid in s_pids:
        assert_reaped(pid)  # type: ignore[arg-type]
    logs = sorted(os.listdir(tmp_path))
    assert len(logs) == 2 and logs[0].startswith("0-python") and logs[1] == "1-stubborn.log"
    with open(tmp_path / logs[0]) as f:
        assert f.read() == "[stdout] a up\n"


def test_output_is_bounded_and_split_by_stream() -> None:
    # Pauses keep the two streams' lines in a known order for the check.
    code = (
        "import sys, time\nfor i in range(50): print('out', i)\n"
        "sys.stdout.flush(); time.sleep(0.2); sys.stderr.write('err\\n'); sys.stderr.flush()\n"
        "time.sleep(0.2); sys.stdout.write('x' * 200000 + '\\n' + 'last')"
    )
    proc = ManagedProcess(py(code), max_lines=10).start()
    assert proc.wait(10) == 0
    lines = proc.output().splitlines()
    assert lines[:7] == [f"out {i}" for i in range(43, 50)]
    assert lines[7] == "err" and lines[9] == "last" and len(lines) == 10
    assert lines[8] == "x" * 65536 + " [line cut]"
    assert proc.output("stderr") == "err"


def test_wait_timeout_is_an_error() -> None:
    proc = ManagedProcess(py("import time; time.sleep(60)")).start()
    try:
        with pytest.raises(sup.SupervisorError, match="still running after 0.2s"):
            proc.wait(0.2)
    finally:
        proc.kill()


def test_atexit_hook_reaps_forgotten_processes() -> None:
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r})\n"
        "from harness.live.supervisor import ManagedProcess, ReadyLine\n"
        "p = ManagedProcess(['sh', '-c', 'echo up; exec sleep 60'], ready=ReadyLine('up')).start()\n"
        "print(p.pid, flush=True)\n"  # and exit without stopping it
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert_dead(int(out.stdout.strip()))


def kill_a_harness(setup: str, how: int) -> list[int]:
    """Run a harness process that starts ``sleep 60`` under a ManagedProcess (after ``setup``)
    and prints the pids of ``p.pid`` and what else ``setup`` names in PIDS; send it ``how``;
    return those pids once it died of it."""
    code = (
        f"import sys, time; sys.path.insert(0, {ROOT!r})\n"
        "from harness.live.supervisor import ManagedProcess, ReadyLine, reap_on_signals\n"
        f"{setup}\n"
        "p = ManagedProcess(['sh', '-c', 'echo up; exec sleep 60'], ready=ReadyLine('up')).start()\n"
        "print(p.pid, p._watchdog.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    harness = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None
        pids = [int(x) for x in harness.stdout.readline().split()]
        assert all(proc_state(pid) not in (None, "Z") for pid in pids)
        os.kill(harness.pid, how)
        assert harness.wait(10) == -how  # it still dies of the signal
    finally:
        harness.kill()
        harness.wait()
        harness.stdout.close()  # type: ignore[union-attr]
    return pids


def test_reap_on_signals_cleans_up_when_the_harness_is_terminated() -> None:
    pid, _ = kill_a_harness("reap_on_signals()", signal.SIGTERM)
    assert_dead(pid, within=0.05)  # reaped before the harness died (the watchdog takes up to 0.5 s)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGABRT])
def test_a_watchdog_reaps_the_implementation_when_the_harness_dies_without_a_word(how: int) -> None:
    """No atexit hook or signal handler runs when the harness is killed or aborts (libzmq's
    assertions abort the process): the watchdog started beside each implementation kills its
    process group once the harness is gone, and then ends."""
    pid, watchdog = kill_a_harness("", how)
    assert_dead(pid)
    assert_dead(watchdog)


def test_the_watchdog_goes_with_the_process_it_watches() -> None:
    p = ManagedProcess(["sh", "-c", "echo up; exec sleep 60"], ready=ReadyLine("up")).start()
    watchdog = p._watchdog
    assert watchdog is not None and watchdog.poll() is None
    p.stop()
    assert watchdog.poll() is not None and p._watchdog is None


def test_free_port_skips_a_port_another_live_harness_process_handed_out(monkeypatch: Any, tmp_path: Path) -> None:
    """Two harness processes on one machine (two runs, pytest's workers) never hand out the same
    port: each writes its pid to a file per port in a shared directory. A port whose file names a
    live process is skipped; one whose process is gone is taken over."""
    lo, _ = ephemeral_range()
    if lo - LOWEST_PORT < 1000:
        pytest.skip("no room below the ephemeral range on this machine")
    monkeypatch.setattr(sup, "PORTS_DIR", str(tmp_path))
    other = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        free = (p for p in range(LOWEST_PORT + 3, lo) if sup._bindable("127.0.0.1", p) and p not in sup._HANDED)
        taken, stale = next(free), next(free)  # (two free ports no test of this process handed out)
        (tmp_path / str(taken)).write_text(str(other.pid))
        (tmp_path / str(stale)).write_text(str(gone.pid))
        picks = [taken, stale]

        class Scripted:
            def randrange(self, a: int, b: int) -> int:
                return picks.pop(0) if picks else random.Random(len(picks)).randrange(a, b)

        monkeypatch.setattr(sup, "_PORT_RNG", Scripted())
        assert free_port() == stale
        assert (tmp_path / str(stale)).read_text() == str(os.getpid())  # now this process's
        assert (tmp_path / str(taken)).read_text() == str(other.pid)
    finally:
        other.kill()
        other.wait()


def test_a_harness_process_gives_its_ports_back_when_it_exits(tmp_path: Path) -> None:
    code = "from harness.live.supervisor import free_port, PORTS_DIR; import os; p = free_port(count=2); " \
           "print(p, sorted(os.listdir(PORTS_DIR)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TMPDIR": str(tmp_path)}, check=True).stdout.split(maxsplit=1)
    port = int(out[0])
    assert out[1].strip() == str(sorted([str(port), str(port + 1)])), out  # held while it ran
    assert os.listdir(tmp_path / "zmq-harness-ports") == []  # and given back at its exit


def test_harness_processes_at_once_never_hand_out_the_same_port(tmp_path: Path) -> None:
    """Four processes taking 500 ports each at the same time, each holding them until all have
    drawn (a process gives its ports back when it exits, so one that finished first could see
    them taken again, lawfully: an earlier version of this test failed so once). Without the
    shared registry some would be the same (500 x 500 draws from some 22,000 ports, six pairs);
    without its lock, now and then one too: a process took a file just created, its pid not yet
    written, for a dead one's."""
    code = ("import sys, time; from harness.live.supervisor import free_port; time.sleep(float(sys.argv[1]) - "
            "time.time()); print(' '.join(str(free_port()) for _ in range(500)), flush=True); sys.stdin.read()")
    start = str(time.time() + 2)
    procs = [subprocess.Popen([sys.executable, "-c", code, start], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "TMPDIR": str(tmp_path)}) for _ in range(4)]
    try:
        outs = [set(map(int, p.stdout.readline().split())) for p in procs]  # type: ignore[union-attr]
    finally:
        for p in procs:
            p.communicate(timeout=60)  # (closes its stdin: it exits)
    assert all(len(o) == 500 for o in outs), [len(o) for o in outs]
    shared = {port for i, a in enumerate(outs) for b in outs[i + 1:] for port in a & b}
    assert not shared, shared
