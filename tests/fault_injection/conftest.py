"""Fixtures for the proxy tests: a ZeroMQ context, proxies that are always stopped, and a check
that no proxy thread outlives its test."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
import zmq

from fault_injection.proxy import ChaosProxy, LinkSpec, codec_classifier
from tests.fault_injection.zmtp_peers import proxy_threads, wait_until


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def make_proxy() -> Iterator[Callable[..., ChaosProxy]]:
    made: list[ChaosProxy] = []

    def make(**kw: Any) -> ChaosProxy:
        kw.setdefault("classify", codec_classifier("dcp"))
        proxy = ChaosProxy(**kw)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.stop()
    assert wait_until(lambda: not proxy_threads(), 3.0), f"proxy threads left: {proxy_threads()}"


def bound_router(ctx: zmq.Context) -> tuple[zmq.Socket, str]:
    """A ROUTER bound to a free port (3 s receive timeout) and its endpoint."""
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.RCVTIMEO, 3000)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    return router, f"tcp://127.0.0.1:{port}"


@pytest.fixture
def router_link(ctx: zmq.Context, make_proxy: Callable[..., ChaosProxy]) -> Callable[..., tuple[Any, ...]]:
    """(proxy, router, [dealers]): a ROUTER bound on a free port, the proxy in front of it, and
    DEALERs named d0, d1... connecting through their own listeners."""

    def build(n: int = 1, **kw: Any) -> tuple[ChaosProxy, zmq.Socket, list[zmq.Socket]]:
        proxy = make_proxy(**kw)
        router, target = bound_router(ctx)
        dealers = []
        for i in range(n):
            ep = proxy.add_link(LinkSpec(target, binder="router", binder_socket="frontend",
                                         connecter=f"d{i}", connecter_socket="backend"))
            dealer = ctx.socket(zmq.DEALER)
            dealer.setsockopt(zmq.ROUTING_ID, f"d{i}".encode())
            dealer.setsockopt(zmq.RCVTIMEO, 3000)
            dealer.connect(ep)
            dealers.append(dealer)
        proxy.start()
        return proxy, router, dealers

    return build


def xpub_and_sub(ctx: zmq.Context, proxy: ChaosProxy) -> tuple[zmq.Socket, zmq.Socket]:
    """A verbose XPUB (node "pub", welcome ``W``) behind the proxy, which is started, and a SUB
    (node "sub") connected through it, subscribed to ``W`` and ``topic``; both sides have seen
    the two subscriptions and the welcome."""
    xpub = ctx.socket(zmq.XPUB)
    xpub.setsockopt(zmq.XPUB_VERBOSE, 1)
    xpub.setsockopt(zmq.XPUB_WELCOME_MSG, b"W")  # sent once the XPUB's own thread attaches the peer
    xpub.setsockopt(zmq.RCVTIMEO, 3000)
    port = xpub.bind_to_random_port("tcp://127.0.0.1")
    ep = proxy.add_link(LinkSpec(f"tcp://127.0.0.1:{port}", binder="pub", connecter="sub", welcome=b"W"))
    proxy.start()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVTIMEO, 3000)
    sub.setsockopt(zmq.SUBSCRIBE, b"W")
    sub.setsockopt(zmq.SUBSCRIBE, b"topic")
    sub.connect(ep)
    assert sorted(xpub.recv_multipart() for _ in range(2)) == [[b"\x01W"], [b"\x01topic"]]
    assert sub.recv_multipart() == [b"W"]
    return xpub, sub

