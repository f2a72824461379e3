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
