"""The live runtime's event loop: one thread that owns every ZeroMQ socket and polls them
with a wake-up pipe, plus what other threads hand it — calls (run now, get the result) and
timed callbacks (``schedule(at_ns, fn)``).

`EventLoop` knows nothing of nodes; `harness.live.runtime.LiveRuntime` subclasses it and
fills in the hooks: what to set up before the loop runs (``_setup``), what to start once it
does (``_begin``), what to do with a readable socket (``_serve``), the earliest node timer
(``_earliest_timer``), what is due at each turn (``_tick``) and what to release at the end
(``_teardown``, ``_after_stop``).

Exceptions of the harness's own (a scheduled callback, a hook) stop the loop: ``_fatal``
holds the first, ``run`` and the waits raise it as `LiveRuntimeError`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

import zmq

from harness.live.collector_time import CollectorTime, FrozenHeap, frozen_heap

log = logging.getLogger(__name__)

T = TypeVar("T")
START_TIMEOUT_S = 10.0
CATCH_UP_POLL_MS = 5  # an idle loop's poll while `catch_up` waits: an empty poll is the proof it is idle


class LiveRuntimeError(RuntimeError):
    """The runtime itself failed (not a node): setup error, dead loop, misuse."""


class EventLoop:
    def __init__(self) -> None:
        self._poll_items: list[tuple[Any, int]] = []
        self._calls: deque[tuple[Callable[[], Any], Future | None]] = deque()
        self._timed: list[tuple[int, int, Callable[[], object]]] = []  # heap of (at_ns, seq, fn)
        self._timed_lock = threading.Lock()
        self._seq = itertools.count()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._fatal: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._setup_error: BaseException | None = None
        self._stopping = False
        self._stopped = False
        self._t0 = time.monotonic_ns()
        # The last time a poll found nothing to read (loop clock): the loop had handed every
        # input queued until then to its node (`catch_up`).
        self._quiet_at = -1
        # The CPU time garbage collections took on the loop thread (`harness.live.collector_time`)
        self._collections = CollectorTime()
        self._frozen: FrozenHeap | None = None  # the loop's hold on the frozen heap while it runs
        self._catching_up = False  # while set, an idle poll returns within CATCH_UP_POLL_MS to say so

    # ---- hooks for the subclass ------------------------------------------------------------------
    def _setup(self) -> None:
        """Before the loop runs, on its thread (open sockets); an exception goes back to start()."""

    def _begin(self) -> None:
        """Once set up, before start() returns (start nodes)."""

    def _serve(self, sock: Any) -> None:
        """A polled socket is readable."""

    def _earliest_timer(self, earliest: int | None) -> int | None:
        """The earliest of ``earliest`` and the subclass's own deadlines."""
        return earliest

    def _tick(self, now: int) -> None:
        """After each poll: whatever of the subclass's own is due at ``now``."""

    def _teardown(self) -> None:
        """On the loop thread as it ends, or in the caller's if it never ran (close sockets)."""

    def _after_stop(self, stuck: bool) -> None:
        """In the caller's thread once the loop has ended (terminate a context, flush)."""

    # ---- time ----------------------------------------------------------------------------------
    @property
    def now_ns(self) -> int:
        """Nanoseconds since `start`: the clock of nodes, traces and schedules."""
        return time.monotonic_ns() - self._t0

    def now(self) -> int:
        return self.now_ns

    def _clock(self) -> int:
        return time.monotonic_ns() - self._t0

    def schedule(self, at_ns: int, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the loop thread at ``at_ns`` (at once if that time has passed)."""
        with self._timed_lock:
            heapq.heappush(self._timed, (at_ns, next(self._seq), fn))
        self._wake()

    def run(self, until_ns: int) -> None:
        """Start if needed, then let the loop work until ``until_ns`` since start. Raises
        `LiveRuntimeError` if the loop died (a harness bug) meanwhile."""
        if self._thread is None:
            self.start()
        while True:
            broken = self._broken()
            if broken is not None:
                raise LiveRuntimeError(broken)
            left = until_ns - self.now_ns
            if left <= 0:
                return
            time.sleep(min(left / 1e9, 0.02))

    def catch_up(self, since_ns: int, limit_ns: int) -> int | None:
        """Wait (at most ``limit_ns``) until a turn of the loop after ``since_ns`` finds nothing to
        read: every message the sockets held at ``since_ns`` has been handed to its node. A loop
        short of CPU runs behind its inputs; a run that judged its nodes at once would blame them
        for messages still queued unread. Returns how long after ``since_ns`` the loop was first
        quiet (ns), or None if it was still busy at the limit (an input that floods it, or a host
        far too slow). Raises `LiveRuntimeError` if the loop died meanwhile."""
        deadline = time.monotonic_ns() + limit_ns
        self._catching_up = True
        self._wake()  # out of a poll that would block until the next timer
        try:
            while True:
                broken = self._broken()
                if broken is not None:
                    raise LiveRuntimeError(broken)
                quiet = self._quiet_at
                if quiet >= since_ns:
                    return quiet - since_ns
                if time.monotonic_ns() >= deadline:
                    return None
                time.sleep(0.002)
        finally:
            self._catching_up = False

    # ---- start, stop, calls -----------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Set up (on the loop thread), begin, and run the loop in a thread. A setup error is
        raised here, with nothing left running."""
        if self._stopped:
            raise LiveRuntimeError("runtime is stopped")
        if self._thread is not None:
            raise LiveRuntimeError("start() called twice")
        self._t0 = time.monotonic_ns()
        self._thread = threading.Thread(target=self._run, name="zmq-harness-live", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise LiveRuntimeError(f"runtime did not start within {timeout}s")
        if self._setup_error is not None:
            error = self._setup_error
            self.stop()
            raise error

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and release what it holds. Idempotent."""
        if self._stopped:
            return
        thread = self._thread
        if thread is threading.current_thread():
            self._stopping = True  # from a hook or call: the loop ends; a later stop() cleans up
            return
        self._stopped = True
        self._stopping = True
        stuck = False
        if thread is not None:
            self._wake()
            thread.join(timeout)
            stuck = thread.is_alive()
        else:
            self._teardown()
        if stuck:
            # A node is stuck inside a handler; its sockets belong to that thread, so leave
            # them (and the context) alone rather than crash the process. Its hold on the frozen
            # heap is given up now (kept for the rest of the process, every later run would freeze
            # the garbage made meanwhile out of every collection), and its collection callback.
            log.error("live runtime loop did not stop within %ss", timeout)
            if self._frozen is not None:
                self._frozen.release()
            self._collections.close()
        else:
            wake_r, wake_w = self._wake_r, self._wake_w
            self._wake_r = self._wake_w = -1  # a closed fd number may be reused: never write it
            os.close(wake_r)
            os.close(wake_w)
        self._after_stop(stuck)
        if stuck:
            raise LiveRuntimeError(f"live runtime loop did not stop within {timeout}s")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def gc_collections(self) -> CollectorTime:
        """The harness process's garbage collections on the loop thread so far (how many, their
        CPU time, the longest): a live run's stats."""
        return self._collections

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive() and self._ready.is_set() and not self._stopping

    def call(self, fn: Callable[[], T], timeout: float = 5.0) -> T:
        """Run ``fn`` on the loop thread and return its result (or raise its exception). Before
        `start` and after `stop` it runs in the caller's thread: no loop owns the sockets then."""
        if threading.current_thread() is self._thread or not self.running:
            return fn()
        fut: Future = Future()
        self._calls.append((fn, fut))
        self._wake()
        return fut.result(timeout)

    def post(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the loop thread soon, without waiting for it (from any thread; an
        exception it raises is the harness's and stops the loop)."""
        self._calls.append((fn, None))
        self._wake()

    def _broken(self) -> str | None:
        if self._fatal is not None:
            return f"live runtime loop died: {self._fatal!r}"
        t = self._thread
        if t is not None and self._ready.is_set() and not t.is_alive():
            return "live runtime is not running"
        return None

    def _harness_failed(self, exc: BaseException) -> None:
        log.error("live runtime stopped by a harness error: %r", exc, exc_info=exc)
        if self._fatal is None:
            self._fatal = exc
        self._stopping = True

    # ---- the loop thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        # The process's garbage collections are the loop's work, not the handler's they fall in
        with frozen_heap() as self._frozen, self._collections:
            self._run_loop()

    def _run_loop(self) -> None:
        try:
            self._poll_items.append((self._wake_r, zmq.POLLIN))
            self._setup()
        except BaseException as exc:  # setup errors go back to start()
            self._setup_error = exc
            self._teardown()
            self._ready.set()
            return
        try:
            self._begin()
            self._ready.set()  # start() returns once everything has begun
            self._loop()
        except BaseException as exc:  # a bug in the runtime itself: make it loud
            self._harness_failed(exc)
        finally:
            self._ready.set()
            self._teardown()
            self._fail_pending_calls()

    def _loop(self) -> None:
        poll = zmq.zmq_poll
        while not self._stopping:
            timeout = self._poll_timeout()
            events = poll(self._poll_items, timeout)
            if not events and timeout:  # it waited and nothing came: not a glance while timers were due
                self._quiet_at = self._clock()
            for sock, _ in events:
                if type(sock) is int:
                    self._run_calls()
                else:
                    self._serve(sock)
                if self._stopping:
                    return
            now = self._clock()
            self._run_timed(now)
            self._tick(now)

    def _poll_timeout(self) -> int:
        if self._calls:
            return 0
        earliest = self._earliest_timer(self._timed[0][0] if self._timed else None)
        if earliest is None:
            return CATCH_UP_POLL_MS if self._catching_up else -1
        wait_ns = earliest - self._clock()
        wait_ms = 0 if wait_ns <= 0 else math.ceil(wait_ns / 1_000_000)
        return min(wait_ms, CATCH_UP_POLL_MS) if self._catching_up else wait_ms

    def _run_timed(self, now: int) -> None:
        timed = self._timed
        while timed and timed[0][0] <= now and not self._stopping:
            with self._timed_lock:
                _, _, fn = heapq.heappop(timed)
            fn()  # the workload and the nemesis: their exceptions are the harness's

    def _run_calls(self) -> None:
        try:
            os.read(self._wake_r, 65536)
        except BlockingIOError:
            pass
        calls = self._calls
        while calls:
            fn, fut = calls.popleft()
            if fut is None:
                fn()
                continue
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

    def _fail_pending_calls(self) -> None:
        while self._calls:
            _, fut = self._calls.popleft()
            if fut is not None and fut.set_running_or_notify_cancel():
                fut.set_exception(LiveRuntimeError("runtime stopped before the call ran"))

    def _wake(self) -> None:
        fd = self._wake_w
        if fd < 0:
            return
        try:
            os.write(fd, b"\0")
        except (BlockingIOError, OSError):
            pass  # pipe full: a wake-up is already pending; closed: the loop is gone
