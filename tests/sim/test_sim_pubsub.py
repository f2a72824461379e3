"""PUB/SUB/XPUB/XSUB semantics: prefix matching, subscription forwarding and notifications,
welcome messages, local filtering, HWM drops, proxies."""

from __future__ import annotations

import pytest

from harness.node import (
    Disconnect,
    Send,
    SocketSpec,
    SocketType,
    Subscribe,
    Unsubscribe,
)
from tests.sim.sim_helpers import (
    MS,
    do,
    fixed_sim,
    log,
    rows,
    run_expecting_failure,
    scripted,
    send,
    writer,
)
from tests.sim.sim_test_nodes import Proxy, Subscriber, Ticker

PUB, SUB, XPUB, XSUB = SocketType.PUB, SocketType.SUB, SocketType.XPUB, SocketType.XSUB
EP = "tcp://pub:1"


def test_pub_delivers_by_prefix_match_on_the_first_frame() -> None:
    sim = fixed_sim()
    scripted(sim, "pub", SocketSpec("p", PUB, bind=(EP,)))
    scripted(sim, "s-a", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"a",)))
    scripted(sim, "s-ab", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"ab",)))
    scripted(sim, "s-all", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"",)))
    scripted(sim, "s-none", SocketSpec("s", SUB, connect=(EP,)))
    for topic in (b"abc", b"ax", b"b"):
        send(sim, 10 * MS, "pub", "p", topic, b"body")
    sim.run(20 * MS)
    assert [f[0] for f in log(sim, "s-a")] == [b"abc", b"ax"]
    assert [f[0] for f in log(sim, "s-ab")] == [b"abc"]
    assert [f[0] for f in log(sim, "s-all")] == [b"abc", b"ax", b"b"]
    assert log(sim, "s-none") == []
    assert log(sim, "s-all")[0] == [b"abc", b"body"]  # multipart travels whole
    assert sim.stats.dropped == {}  # non-matching messages are never sent: no drops


def test_slow_joiner_loses_what_was_published_before_its_subscription_arrived() -> None:
    sim = fixed_sim()
    scripted(sim, "pub", SocketSpec("p", PUB, bind=(EP,)))
    scripted(sim, "sub", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"",)))
    # Handshake 2 ms, then the subscription takes 1 ms to reach the PUB: it arrives at 3 ms,
    # after the publish scheduled for 3 ms (same time: scheduled earlier runs first).
    for k in range(6):
        send(sim, k * MS, "pub", "p", str(k).encode())
    sim.run(10 * MS)
    assert [f[0] for f in log(sim, "sub")] == [b"4", b"5"]


def test_subscribe_and_unsubscribe_actions_are_reference_counted() -> None:
    sim = fixed_sim()
    scripted(sim, "pub", SocketSpec("p", PUB, bind=(EP,)))
    scripted(sim, "sub", SocketSpec("s", SUB, connect=(EP,)))
    do(sim, 5 * MS, "sub", Subscribe("s", b"t"), Subscribe("s", b"t"))
    send(sim, 10 * MS, "pub", "p", b"t1")
    do(sim, 15 * MS, "sub", Unsubscribe("s", b"t"))  # one left: still subscribed
    send(sim, 20 * MS, "pub", "p", b"t2")
    do(sim, 25 * MS, "sub", Unsubscribe("s", b"t"))  # count reaches 0: unsubscription sent
    send(sim, 30 * MS, "pub", "p", b"t3")
    sim.run(40 * MS)
    assert [f[0] for f in log(sim, "sub")] == [b"t1", b"t2"]


def test_sub_filters_messages_already_in_flight_after_it_unsubscribed(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    scripted(sim, "pub", SocketSpec("p", PUB, bind=(EP,)))
    scripted(sim, "sub", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"t",)))
    do(sim, 10 * MS, "sub", Unsubscribe("s", b"t"))
    send(sim, 10 * MS + 500_000, "pub", "p", b"t-late")  # the PUB has not heard yet
    sim.run(20 * MS)
    trace.close()
    assert log(sim, "sub") == []
    assert sim.stats.dropped == {"filtered": 1}
    assert rows(trace.path, kind="drop")[0]["node"] == "sub"


def test_sub_cannot_send() -> None:
    sim = fixed_sim()
    scripted(sim, "sub", SocketSpec("s", SUB, connect=(EP,)))
    send(sim, 1 * MS, "sub", "s", b"x")
    run_expecting_failure(sim, 5 * MS, "sub", "cannot send")


def test_pub_drops_at_the_high_water_mark_of_a_paused_subscriber(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    scripted(sim, "pub", SocketSpec("p", PUB, bind=(EP,), hwm=5))
    scripted(sim, "fast", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"",)))
    scripted(sim, "slow", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"",), hwm=5))
    sim.schedule(5 * MS, lambda: sim.pause("slow"))
    for k in range(20):
        send(sim, 10 * MS, "pub", "p", b"%02d" % k)
    sim.schedule(50 * MS, lambda: sim.resume("slow"))
    sim.run(60 * MS)
    trace.close()
    assert len(log(sim, "fast")) == 20
    assert [f[0] for f in log(sim, "slow")] == [b"%02d" % k for k in range(10)]  # 5 + 5 buffered
    assert sim.stats.dropped == {"hwm": 10}
    drops = rows(trace.path, kind="drop")
    assert {(r["node"], r["peer"], r["fault"]) for r in drops} == {("pub", "slow", "hwm")}


def test_xpub_passes_new_subscriptions_and_the_last_unsubscription() -> None:
    sim = fixed_sim()
    scripted(sim, "xpub", SocketSpec("x", XPUB, bind=(EP,)))
    scripted(sim, "s1", SocketSpec("s", SUB, connect=(EP,)))
    scripted(sim, "s2", SocketSpec("s", SUB, connect=(EP,)))
    do(sim, 5 * MS, "s1", Subscribe("s", b"t"))
    do(sim, 6 * MS, "s2", Subscribe("s", b"t"))  # duplicate topic: not passed on
    do(sim, 7 * MS, "s2", Subscribe("s", b"u"))
    do(sim, 8 * MS, "s2", Unsubscribe("s", b"t"))  # s1 still subscribed: not passed on
    do(sim, 9 * MS, "s1", Unsubscribe("s", b"t"))  # the last one: passed on
    sim.run(20 * MS)
    assert log(sim, "xpub") == [[b"\x01t"], [b"\x01u"], [b"\x00t"]]


def test_xpub_verbose_passes_duplicate_subscriptions() -> None:
    sim = fixed_sim()
    scripted(sim, "xpub", SocketSpec("x", XPUB, bind=(EP,), xpub_verbose=True))
    scripted(sim, "s1", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"t",)))
    scripted(sim, "s2", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"t",)), start_at=5 * MS)
    sim.run(20 * MS)
    assert log(sim, "xpub") == [[b"\x01t"], [b"\x01t"]]


@pytest.mark.parametrize("how", ["crash", "disconnect"])
def test_xpub_hears_unsubscription_when_the_last_subscriber_goes_away(how: str) -> None:
    sim = fixed_sim()
    scripted(sim, "xpub", SocketSpec("x", XPUB, bind=(EP,)))
    scripted(sim, "s1", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"t", b"v")))
    scripted(sim, "s2", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"v",)))
    if how == "crash":
        sim.schedule(10 * MS, lambda: sim.crash("s1"))
    else:
        do(sim, 10 * MS, "s1", Disconnect("s", EP))
    sim.run(20 * MS)
    assert log(sim, "xpub") == [[b"\x01t"], [b"\x01v"], [b"\x00t"]]  # v still has s2


def test_xpub_sends_its_welcome_message_to_each_new_subscriber() -> None:
    sim = fixed_sim()
    scripted(sim, "xpub", SocketSpec("x", XPUB, bind=(EP,), welcome=b"WELCOME"))
    scripted(sim, "s1", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"W",)))
    scripted(sim, "s2", SocketSpec("s", SUB, connect=(EP,), subscribe=(b"x",)))  # filters it out
    sim.run(10 * MS)
    assert log(sim, "s1") == [[b"WELCOME"]]
    assert log(sim, "s2") == []
    assert sim.stats.dropped == {"filtered": 1}


def test_xsub_subscriptions_go_upstream_and_are_resent_on_reconnect() -> None:
    sim = fixed_sim()
    scripted(sim, "x1", SocketSpec("x", XPUB, bind=("tcp://x1:1",)))
    scripted(sim, "x2", SocketSpec("x", XPUB, bind=("tcp://x2:1",)))
    scripted(sim, "xsub", SocketSpec("s", XSUB, connect=("tcp://x1:1", "tcp://x2:1")))
    send(sim, 5 * MS, "xsub", "s", b"\x01topic")
    send(sim, 6 * MS, "xsub", "s", b"user", b"message")  # not a subscription: passed to the node
    sim.run(10 * MS)
    for name in ("x1", "x2"):
        assert log(sim, name) == [[b"\x01topic"], [b"user", b"message"]]
    sim.crash("x2")
    sim.schedule(50 * MS, lambda: sim.restart("x2"))
    sim.run(300 * MS)
    assert log(sim, "x2") == [[b"\x01topic"]]  # the new incarnation learnt it on reconnect
    send(sim, 300 * MS, "xsub", "s", b"\x00topic")
    sim.run(310 * MS)
    assert log(sim, "x1")[-1] == [b"\x00topic"] and log(sim, "x2")[-1] == [b"\x00topic"]


def test_xsub_unsubscribe_without_subscription_is_not_forwarded() -> None:
    sim = fixed_sim()
    scripted(sim, "x1", SocketSpec("x", XPUB, bind=("tcp://x1:1",)))
    scripted(sim, "xsub", SocketSpec("s", XSUB, connect=("tcp://x1:1",)))
    send(sim, 5 * MS, "xsub", "s", b"\x00never")
    sim.run(10 * MS)
    assert log(sim, "x1") == []


def test_pub_can_connect_and_sub_can_bind() -> None:
    sim = fixed_sim()
    scripted(sim, "sub", SocketSpec("s", SUB, bind=("tcp://sub:1",), subscribe=(b"",)))
    scripted(sim, "pub", SocketSpec("p", PUB, connect=("tcp://sub:1",)))
    send(sim, 10 * MS, "pub", "p", b"hello")
    sim.run(20 * MS)
    assert log(sim, "sub") == [[b"hello"]]


def test_proxy_forwards_data_down_and_subscriptions_up(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    sim.add_node("ticker", Ticker, role="publisher",
                 config={"type": "XPUB", "bind": ["tcp://ticker:1"], "topics": [b"a", b"b"], "limit": 5})
    sim.add_node("proxy", Proxy, role="proxy",
                 config={"upstream": ["tcp://ticker:1"], "downstream": "tcp://proxy:2"})
    sim.add_node("sub", Subscriber, role="subscriber",
                 config={"connect": ["tcp://proxy:2"], "topics": [b"a"]})
    sim.run(200 * MS)
    trace.close()
    got = sim.node("sub").got  # type: ignore[union-attr]
    assert got and all(f.startswith(b"a:") for f in got)
    assert sim.node("ticker").log == [[b"\x01a"]]  # type: ignore[union-attr]
    # The ticker filters at the source: its b-messages reach nobody and nothing is dropped.
    b_ids = {r["msg_id"] for r in rows(trace.path, kind="send", node="ticker", topic="b")}
    assert b_ids and not [r for r in rows(trace.path, kind="recv") if r["msg_id"] in b_ids]
    assert sim.stats.dropped == {}


def test_subscribe_on_a_router_is_an_error() -> None:
    sim = fixed_sim()
    scripted(sim, "r", SocketSpec("r", SocketType.ROUTER, bind=(EP,)))
    do(sim, 1 * MS, "r", Subscribe("r", b"x"))
    run_expecting_failure(sim, 5 * MS, "r", "SUB and XSUB")


def test_unknown_socket_is_a_clear_error() -> None:
    sim = fixed_sim()
    scripted(sim, "pub", SocketSpec("p", PUB, bind=(EP,)))
    do(sim, 1 * MS, "pub", Send("nope", [b"x"]))
    run_expecting_failure(sim, 5 * MS, "pub", "has no socket 'nope'; it declared: p")
