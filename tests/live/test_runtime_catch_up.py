"""At the end of a live run the harness waits, within a bound, for its loop to hand the nodes
what their sockets already hold (``EventLoop.catch_up``): a loop short of CPU runs behind its
inputs, and judging the nodes at once would blame them for messages still queued unread."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import zmq

from harness.live.runtime import LiveRuntime
from harness.node import Action, BaseNode, Deliver, SocketSpec, SocketType

pytestmark = [pytest.mark.live, pytest.mark.timeout(30)]
MESSAGES = 40
HANDLER_S = 0.01  # what the slow node takes per message: 40 of them are 0.4 s of backlog


class SlowSink(BaseNode):
    """A ROUTER that takes ``HANDLER_S`` over each message (a handler slow by itself)."""

    protocol = "test"
    role = "sink"

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("in", SocketType.ROUTER, bind=("tcp://127.0.0.1:*",))]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        time.sleep(HANDLER_S)
        return [Deliver("got", {"body": frames[-1]})]


def sink_endpoint(rt: LiveRuntime) -> str:
    return rt.endpoints("sink")["in"][0]


def got(rt: LiveRuntime) -> int:
    return sum(d.kind == "got" for d in rt.deliveries)


def test_catch_up_waits_until_what_was_queued_at_the_end_is_handed_to_the_node(
        runtime: LiveRuntime, no_thread_leak: None) -> None:
    runtime.add_node("sink", SlowSink, role="sink")
    runtime.start()
    with zmq.Context() as ctx, ctx.socket(zmq.DEALER) as dealer:
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(sink_endpoint(runtime))
        runtime.wait_for(lambda ds: True, timeout=1)
        for i in range(MESSAGES):
            dealer.send(b"%d" % i)
        runtime.wait_for(lambda ds: any(d.kind == "got" for d in ds), timeout=5)
        end = runtime.now_ns
        assert got(runtime) < MESSAGES / 2  # the premise: at the end most are still queued unread
        behind = runtime.catch_up(end, 5 * 10**9)
    assert got(runtime) == MESSAGES
    assert behind is not None and behind >= (MESSAGES / 2) * HANDLER_S * 1e9, behind


def test_an_idle_loop_is_caught_up_at_once(runtime: LiveRuntime) -> None:
    runtime.add_node("sink", SlowSink, role="sink")
    runtime.start()
    end = runtime.now_ns
    waited = time.monotonic()
    assert runtime.catch_up(end, 5 * 10**9) is not None
    assert time.monotonic() - waited < 1.0


def test_a_flood_that_never_lets_the_loop_catch_up_is_given_up_at_the_bound(
        runtime: LiveRuntime, no_thread_leak: None) -> None:
    runtime.add_node("sink", SlowSink, role="sink")
    runtime.start()
    stop = threading.Event()

    def flood(endpoint: str) -> None:  # bounded: 400 messages or 3 s, whichever comes first
        with zmq.Context() as ctx, ctx.socket(zmq.DEALER) as dealer:
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.connect(endpoint)
            deadline = time.monotonic() + 3
            for i in range(400):
                if stop.is_set() or time.monotonic() > deadline:
                    break
                dealer.send(b"%d" % i)
                time.sleep(HANDLER_S / 4)

    flooder = threading.Thread(target=flood, args=(sink_endpoint(runtime),))
    flooder.start()
    try:
        runtime.wait_for(lambda ds: sum(d.kind == "got" for d in ds) >= 5, timeout=5)
        began = time.monotonic()
        assert runtime.catch_up(runtime.now_ns, 5 * 10**8) is None
        assert 0.4 < time.monotonic() - began < 2.0
    finally:
        stop.set()
        flooder.join(5)


def test_a_dead_loop_is_said_at_once(runtime: Any) -> None:
    runtime.add_node("sink", SlowSink, role="sink")
    runtime.start()
    runtime._fatal = RuntimeError("a harness bug")  # what _harness_failed records
    with pytest.raises(Exception, match="loop died"):
        runtime.catch_up(runtime.now_ns + 10**9, 10**9)
