"""Start implementations under test as subprocesses, wait until they are ready, always reap them.

Every process runs in its own session (so its process group id is its pid): stop, kill, pause
and resume act on the whole group, so a wrapper script's children go too. Every wait is
bounded and fails with the last lines of the process's output. A module-level registry with an
atexit hook kills and reaps whatever is still running when the interpreter exits.
"""

from __future__ import annotations

import atexit
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Callable, Mapping, Sequence, Union

try:
    import fcntl
except ImportError:  # (not on Windows: the registry then has no lock)
    fcntl = None  # type: ignore[assignment]

from harness.interrupts import shielded
from harness.live.output import OutputBuffer, start_reader

DEFAULT_READY_TIMEOUT = 10.0
KILL_WAIT_S = 5.0  # after SIGKILL; only a process stuck in the kernel takes longer
TAIL_LINES = 20


class SupervisorError(RuntimeError):
    """A managed process could not be started, became unusable, or would not die."""


class ProcessExitedEarly(SupervisorError):
    """The process exited before it was ready."""


class ReadyTimeout(SupervisorError):
    """The process was still running but not ready in time (it has been killed)."""


class PlaceholderError(ValueError):
    """A command line names a placeholder that has no value, or is malformed."""


# ---- ports and command lines -----------------------------------------------------------------


# Ports handed out by free_port, never handed out twice by this process (a port is free only
# until whoever was given it binds it).
_HANDED: set[int] = set()
_HANDED_LOCK = threading.Lock()
_PORT_RNG = random.Random()  # its own generator: the global one belongs to nobody here
LOWEST_PORT = 10000
# Ports handed out by the harness processes of this machine (two runs at once, pytest's workers):
# a file per port holding the pid of the process that handed it out. A port is free to bind only
# until whoever was given it binds it, and a node of one run may keep reconnecting to a port after
# its implementation exited: given to another run's chaos proxy, that node's messages were taken
# for one of that run's nodes (a PPPP subscriber's, for a Raft peer's). A file a process that is
# gone left behind is taken over.
PORTS_DIR = os.path.join(tempfile.gettempdir(), "zmq-harness-ports")
_CLAIMED: list[str] = []  # this process's files, removed when it exits


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _claim(port: int) -> bool:
    """Reserve ``port`` against the other harness processes of this machine (see PORTS_DIR);
    False when a live one holds it. Without a registry (a temporary directory that cannot be
    written) only this process's bookkeeping applies.

    The registry's lock (``flock`` on PORTS_DIR + ".lock", released by the kernel if the holder
    dies) makes looking at a file and taking it over one step: without it a process that found
    another's file just created, its pid not yet written, took it for a dead one's and took the
    port over too (4 processes taking 500 ports each at once, 6 rounds: 2 ports held twice in 2 of
    3 trials; none with the lock)."""
    try:
        os.makedirs(PORTS_DIR, exist_ok=True)
        lock = os.open(PORTS_DIR + ".lock", os.O_CREAT | os.O_RDWR, 0o666)
    except OSError:
        return True
    try:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _claim_locked(port)
    finally:
        os.close(lock)  # (releases the lock)


def _claim_locked(port: int) -> bool:
    path = os.path.join(PORTS_DIR, str(port))
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            try:
                with open(path) as f:
                    owner = int(f.read().strip() or 0)
            except (OSError, ValueError):
                owner = 0
            if owner and owner != os.getpid() and _alive(owner):
                return False
            try:  # left by a process that is gone (an empty one: it died before writing): take it over
                os.unlink(path)
            except OSError:
                pass
            continue
        except OSError:
            return True
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        _CLAIMED.append(path)
        return True
    return False


def _release_claims() -> None:
    for path in _CLAIMED:
        try:
            with open(path) as f:
                mine = f.read().strip() == str(os.getpid())
            if mine:
                os.unlink(path)
        except OSError:
            pass
    _CLAIMED.clear()


atexit.register(_release_claims)


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux's default if the
    system does not say)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1", count: int = 1) -> int:
    """A TCP port free on ``host`` now, for a process that will bind it a moment later; with
    ``count``, the first of that many consecutive free ports (an Event BUS server binds P, P+1
    and P+2).

    It is taken below the kernel's ephemeral range, so no outgoing connection of any process
    (a peer connecting while an implementation under test starts) can take it in between, as
    one did with ports the kernel picked; and this process never hands the same port out twice.
    """
    lo, _ = ephemeral_range()

    def usable(port: int) -> bool:
        block = range(port, port + count)
        if port + count > 65536 or _HANDED.intersection(block) or not all(_bindable(host, p) for p in block):
            return False
        claimed = []
        for p in block:
            if not _claim(p):
                _HANDED.update(claimed)  # (kept: another process may take them only after this one exits)
                return False
            claimed.append(p)
        return True

    with _HANDED_LOCK:
        if lo - LOWEST_PORT >= 1000:
            for _ in range(200):
                port = _PORT_RNG.randrange(LOWEST_PORT, lo - count + 1)
                if usable(port):
                    _HANDED.update(range(port, port + count))
                    return port
        for _ in range(200):  # no room below the ephemeral range: a port the kernel picks
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if usable(port):
                _HANDED.update(range(port, port + count))
                return port
    raise SupervisorError(f"no {count} free consecutive TCP port(s) on {host}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def fill_placeholders(cmd: str | Sequence[str], values: Mapping[str, Any]) -> list[str]:
    """Split ``cmd`` like a shell (a list is taken as already split), then replace ``{name}``
    in each argument with ``values[name]``. ``{{`` and ``}}`` stand for literal braces, as in
    str.format; a single brace is an error. Values are substituted after splitting, so a value
    with spaces stays one argument."""
    try:
        args = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    except ValueError as e:  # an unbalanced quote
        raise PlaceholderError(f"command {cmd!r} cannot be split into words like a shell would: {e}") from None
    if not args:
        raise PlaceholderError("empty command line")
    unknown: list[str] = []

    def sub(m: re.Match[str]) -> str:
        text = m.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        if text in "{}":
            raise PlaceholderError(
                f"single {text!r} in argument {m.string!r} of command {cmd!r} (write {{{{ and "
                "}} for literal braces)"
            )
        name = m.group(1)
        if not name.isidentifier():
            raise PlaceholderError(
                f"malformed placeholder {text!r} in command {cmd!r} (write {{{{ and }}}} for "
                "literal braces)"
            )
        if name not in values:
            if name not in unknown:
                unknown.append(name)
            return text
        return str(values[name])

    out = [_FIELD.sub(sub, a) for a in args]
    if unknown:
        known = ", ".join("{" + k + "}" for k in values) or "none"
        raise PlaceholderError(
            f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} in command "
            f"{cmd!r}; known: {known}"
        )
    return out


# ---- readiness ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadyLine:
    """Ready when a line of output matches ``pattern`` (re.search)."""

    pattern: str
    stream: str = "both"  # "stdout", "stderr" or "both"
    timeout: float = DEFAULT_READY_TIMEOUT


@dataclass(frozen=True)
class ReadyPort:
    """Ready when ``host:port`` accepts a TCP connection, and each of the ``count - 1`` ports
    after it (an Event BUS server binds P, P+1 and P+2, maybe one after another)."""

    port: int
    host: str = "127.0.0.1"
    timeout: float = DEFAULT_READY_TIMEOUT
    count: int = 1


@dataclass(frozen=True)
class ReadyDelay:
    """Ready after ``seconds`` if the process is still running."""

    seconds: float


ReadyCheck = Union[ReadyLine, ReadyPort, ReadyDelay, None]


# ---- the registry that guarantees reaping --------------------------------------------------------

_registry: set["ManagedProcess"] = set()
_registry_lock = threading.Lock()


def _register(proc: "ManagedProcess") -> None:
    with _registry_lock:
        _registry.add(proc)


def _unregister(proc: "ManagedProcess") -> None:
    with _registry_lock:
        _registry.discard(proc)


# Kills the process group of an implementation once the harness that started it is gone, however
# it went (SIGKILL, a libzmq abort, a crash): atexit and signal handlers cover only the clean
# ways. A shell that reads its parent's pid from /proc every half second: no Python, no fork but
# sleep's.
WATCHDOG = ('h={harness}; while :; do read -r _ _ _ p _ < /proc/$$/stat 2>/dev/null || p=1; '
            '[ "$p" = "$h" ] || break; sleep 0.5; done; kill -9 -{group} 2>/dev/null; exit 0')


def start_watchdog(group: int) -> subprocess.Popen[bytes] | None:
    """A watchdog of the process group ``group`` (None where there is no /proc: no watchdog)."""
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        return None
    try:
        return subprocess.Popen(["sh", "-c", WATCHDOG.format(harness=os.getpid(), group=group)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return None


def stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    if watchdog is not None and watchdog.poll() is None:
        watchdog.kill()
        try:
            watchdog.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass


def running_processes() -> list["ManagedProcess"]:
    with _registry_lock:
        return list(_registry)


@atexit.register
def reap_all() -> None:
    """Kill and reap every managed process still running (also runs at interpreter exit)."""
    for proc in running_processes():
        try:
            proc.kill()
        except SupervisorError:
            pass


def reap_on_signals(signals: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> None:
    """Make these signals reap managed processes before the harness dies of them (atexit hooks
    do not run on a fatal signal). A Python handler that was installed before is still called
    afterwards; otherwise the default action follows. Main thread only (as signal.signal)."""
    for sig in signals:
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: Any, previous: Any = previous) -> None:
            reap_all()
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)


# ---- one process -------------------------------------------------------------------------------


class ManagedProcess:
    """One implementation under test. `start` runs it and waits until it is ready."""

    def __init__(
        self,
        cmd: str | Sequence[str],
        *,
        values: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        ready: ReadyCheck = None,
        log_path: str | None = None,
        name: str | None = None,
        max_lines: int = 2000,
        on_line: Callable[[str, str], None] | None = None,
    ) -> None:
        self.args = fill_placeholders(cmd, values or {})
        self.on_line = on_line  # (stream, line) for every line of output, on a reader thread
        self.env = dict(env) if env is not None else None  # added on top of os.environ
        self.cwd = cwd
        self.ready = ready
        self.log_path = log_path
        self.name = name or os.path.basename(self.args[0])
        self.max_lines = max_lines
        self.ready_match: re.Match[str] | None = None
        self.buffer = OutputBuffer(max_lines)
        self._popen: subprocess.Popen[bytes] | None = None
        self._readers: list[threading.Thread] = []
        self._log: IO[str] | None = None
        self._lock = threading.RLock()
        self._reaped = False
        self._watchdog: subprocess.Popen[bytes] | None = None

    # -- lifecycle

    def start(self) -> "ManagedProcess":
        """Start the process and wait for readiness. On failure the process is killed and
        reaped and `ProcessExitedEarly` or `ReadyTimeout` says why, with its last output."""
        with self._lock:
            if self.running:
                raise SupervisorError(f"{self.name}: already running (pid {self.pid})")
            self._reap_readers()
            self.buffer = OutputBuffer(self.max_lines)
            self.ready_match = None
            env = None if self.env is None else {**os.environ, **self.env}
            if self.log_path is not None:
                self._log = open(self.log_path, "a", encoding="utf-8")
            # A stop signal (harness.interrupts) waits until the child is registered for
            # reaping: raised in the middle of Popen, it would orphan the forked child.
            with shielded():
                try:
                    self._popen = subprocess.Popen(
                        self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, env=env, cwd=self.cwd, start_new_session=True,
                    )
                except OSError as exc:
                    self._close_log()
                    raise SupervisorError(f"{self.name}: cannot start {self.args!r}: {exc}") from exc
                self._reaped = False
                _register(self)
                self._watchdog = start_watchdog(self._popen.pid)
            assert self._popen.stdout is not None and self._popen.stderr is not None
            self._readers = [
                start_reader(self._popen.stdout, "stdout", self.buffer, self._log, self.on_line),
                start_reader(self._popen.stderr, "stderr", self.buffer, self._log, self.on_line),
            ]
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self, grace: float = 2.0) -> int | None:
        """SIGTERM to the process group; SIGKILL after ``grace`` seconds. Returns the exit code."""
        with self._lock:
            p = self._popen
            if p is None:
                return None
            if p.poll() is None:
                self._signal_group(signal.SIGTERM)
                self._signal_group(signal.SIGCONT)  # a paused process cannot act on SIGTERM
                try:
                    p.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
            return self._finish()

    def kill(self) -> int | None:
        """SIGKILL to the process group, then reap."""
        with self._lock:
            if self._popen is None:
                return None
            return self._finish()

    def restart(self, grace: float = 2.0) -> "ManagedProcess":
        self.stop(grace)
        return self.start()

    def pause(self) -> None:
        """SIGSTOP the process group (a hung implementation, as far as its peers can tell)."""
        self._require_running()
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self._require_running()
        self._signal_group(signal.SIGCONT)

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit on its own; raises SupervisorError on timeout."""
        p = self._require_started()
        try:
            code = p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise SupervisorError(
                f"{self.name}: still running after {timeout}s\n{self.buffer.tail(TAIL_LINES)}"
            ) from None
        self._finish()
        return code

    def __enter__(self) -> "ManagedProcess":
        if self._popen is None:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- accessors

    @property
    def pid(self) -> int | None:
        return None if self._popen is None else self._popen.pid

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def output(self, stream: str | None = None) -> str:
        """Captured output (the last ``max_lines`` lines), optionally of one stream."""
        return "\n".join(self.buffer.lines(stream))

    def tail(self, n: int = TAIL_LINES) -> str:
        return self.buffer.tail(n)

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.name} pid={self.pid} rc={self.returncode}>"

    # -- internals

    def _wait_ready(self) -> None:
        ready = self.ready
        if ready is None:
            return
        if isinstance(ready, ReadyDelay):
            self._wait_delay(ready)
        elif isinstance(ready, ReadyPort):
            self._wait_port(ready)
        elif isinstance(ready, ReadyLine):
            self._wait_line(ready)
        else:
            raise TypeError(f"unknown readiness check {ready!r}")

    def _wait_delay(self, ready: ReadyDelay) -> None:
        p = self._require_started()
        try:
            p.wait(ready.seconds)
        except subprocess.TimeoutExpired:
            return
        raise self._exited_early(f"within the {ready.seconds}s start-up delay")

    def _wait_port(self, ready: ReadyPort) -> None:
        p = self._require_started()
        deadline = time.monotonic() + ready.timeout
        port = ready.port  # the next port to wait for
        while True:
            if p.poll() is not None:
                raise self._exited_early(f"before {ready.host}:{port} accepted connections")
            try:
                with socket.create_connection((ready.host, port), timeout=0.25):
                    port += 1
                    if port == ready.port + ready.count:
                        return
                    continue
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise ReadyTimeout(
                    f"{self.name}: {ready.host}:{port} not accepting connections after "
                    f"{ready.timeout}s\n--- last output ---\n{self.buffer.tail(TAIL_LINES)}"
                )
            time.sleep(0.02)

    def _wait_line(self, ready: ReadyLine) -> None:
        p = self._require_started()
        pattern = re.compile(ready.pattern)
        deadline = time.monotonic() + ready.timeout
        seen = 0
        buf = self.buffer
        with buf.cond:
            while True:
                for number, stream, line in buf.since(seen):
                    seen = number + 1
                    if ready.stream in ("both", stream):
                        m = pattern.search(line)
                        if m is not None:
                            self.ready_match = m
                            return
                # Exited and both pipes drained: no line can come any more.
                if p.poll() is not None and not buf.streams_open:
                    raise self._exited_early(f"before printing a line matching {ready.pattern!r}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ReadyTimeout(
                        f"{self.name}: no output line matching {ready.pattern!r} within "
                        f"{ready.timeout}s\n--- last output ---\n{buf.tail(TAIL_LINES)}"
                    )
                # Bounded sleep: process exit is not signalled through the condition.
                buf.cond.wait(min(remaining, 0.1))

    def _exited_early(self, when: str) -> ProcessExitedEarly:
        p = self._require_started()
        code = p.wait(KILL_WAIT_S)
        for t in self._readers:  # let the readers catch the final lines
            t.join(1.0)
        return ProcessExitedEarly(
            f"{self.name}: exited with code {code} {when}: {shlex.join(self.args)}"
            f"\n--- last output ---\n{self.buffer.tail(TAIL_LINES)}"
        )

    def _finish(self) -> int | None:
        """SIGKILL whatever is left of the group, reap the process, collect its output."""
        p = self._popen
        assert p is not None
        if self._reaped:
            return p.returncode
        self._signal_group(signal.SIGKILL)
        try:
            p.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            raise SupervisorError(
                f"{self.name}: pid {p.pid} survived SIGKILL for {KILL_WAIT_S}s"
            ) from None
        # Sweep children that ignored SIGTERM and outlived the leader. Linux does not reuse a
        # pid while a process group of that id still exists, so this cannot hit a stranger
        # unless the group is already empty and the pid was reused in this instant.
        self._signal_group(signal.SIGKILL, after_reap=True)
        self._reaped = True
        _unregister(self)
        stop_watchdog(self._watchdog)
        self._watchdog = None
        self._reap_readers()
        return p.returncode

    def _reap_readers(self) -> None:
        for t in self._readers:
            t.join(1.0)  # a grandchild outside the group may hold the pipe: don't wait forever
        self._readers = []
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            try:
                self._log.close()
            except OSError:
                pass
            self._log = None

    def _signal_group(self, sig: int, after_reap: bool = False) -> None:
        p = self._popen
        if p is None:
            return
        try:
            # The group id is the pid (own session). Once the leader is reaped its pid may be
            # reused, so normally signal only while it is unreaped (running or a zombie).
            if p.returncode is None or after_reap:
                os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _require_started(self) -> subprocess.Popen[bytes]:
        if self._popen is None:
            raise SupervisorError(f"{self.name}: not started")
        return self._popen

    def _require_running(self) -> None:
        if not self.running:
            raise SupervisorError(f"{self.name}: not running (exit code {self.returncode})")


# ---- many processes ------------------------------------------------------------------------------


class Supervisor:
    """Starts managed processes and stops all of them on `stop_all` / leaving the context."""

    def __init__(self, log_dir: str | None = None) -> None:
        self.log_dir = log_dir
        self.processes: list[ManagedProcess] = []

    def start(
        self,
        cmd: str | Sequence[str],
        *,
        values: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        ready: ReadyCheck = None,
        name: str | None = None,
    ) -> ManagedProcess:
        proc = ManagedProcess(cmd, values=values, env=env, cwd=cwd, ready=ready, name=name)
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            proc.log_path = os.path.join(self.log_dir, f"{len(self.processes)}-{proc.name}.log")
        self.processes.append(proc)
        return proc.start()

    def stop_all(self, grace: float = 2.0) -> None:
        errors = []
        for proc in reversed(self.processes):
            try:
                proc.stop(grace)
            except SupervisorError as exc:
                errors.append(str(exc))
        if errors:
            raise SupervisorError("; ".join(errors))

    def __enter__(self) -> "Supervisor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_all()
