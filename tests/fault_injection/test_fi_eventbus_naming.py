"""An Event BUS PUB and a BROADCAST have the same frames: only the socket tells them apart. The
chaos proxy names a message as it decodes on the channel of the sockets at either end
(fault_injection.naming.codec_classifier). Before, it named every PUB a BROADCAST (the codec's
first candidate), so a rule on PUB never matched one live, and a rule on BROADCAST hit the PUBs
too: in eventbus/chaos/lossy.yaml with the server run as a process, its 3% PUB drop dropped none
of the clients' 237 PUBs."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import zmq

from fault_injection.naming import codec_classifier
from fault_injection.proxy import ChaosProxy, LinkSpec
from fault_injection.rules import RuleSet
from harness.protocols import codec
from tests.fault_injection.conftest import bound_router

EVENT = {"topic": "/w/x", "sequence": 1, "producer": "app", "uuid": "0c2f7b4e-8d1a-4f6e-9b3a-5d6c7e8f9a01",
         "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"}
PUB = codec("eventbus").encode("PUB", EVENT)


def test_the_same_frames_are_named_by_the_channel_of_their_sockets() -> None:
    classify = codec_classifier("eventbus")
    assert classify(PUB, (1, "to_binder"), ("collector", "collector")) == "PUB"
    assert classify(PUB, (1, "to_connecter"), ("publisher", "publisher")) == "BROADCAST"
    assert classify(PUB, (1, "to_binder"), ("", "collector")) == "PUB", "one end's name is enough"
    # no channel, or one that decodes nothing: the codec's first candidate, as before
    assert classify(PUB) == "BROADCAST"
    assert classify(PUB, (1, "to_binder"), ("frontend",)) == "BROADCAST"
    # frames that only one message has are named as before, whatever the channel
    syncstart = codec("eventbus").encode("SYNCSTART", {"subtrees": ["/w/"], "sequence": 0})
    assert classify(syncstart, (2, "to_binder"), ("collector",)) == "SYNCSTART"


@pytest.mark.live
@pytest.mark.timeout(30)
@pytest.mark.parametrize("rule,dropped", [("PUB", True), ("BROADCAST", False)])
def test_a_rule_on_pub_drops_a_pub_to_the_collector(ctx: zmq.Context, make_proxy: Callable[..., ChaosProxy],
                                                    rule: str, dropped: bool) -> None:
    proxy = make_proxy(rules=RuleSet.from_dicts([{"message": rule, "drop": True}]),
                       classify=codec_classifier("eventbus"))
    router, target = bound_router(ctx)
    ep = proxy.add_link(LinkSpec(target, binder="bus", binder_socket="collector",
                                 connecter="app", connecter_socket="collector.0"))
    dealer: Any = ctx.socket(zmq.DEALER)
    dealer.connect(ep)
    proxy.start()
    dealer.send_multipart(PUB)
    if dropped:
        assert router.poll(500, zmq.POLLIN) == 0, "the PUB was dropped"
        assert [(e.kind, e.msg_type) for e in proxy.drain_events() if e.kind == "drop"] == [("drop", "PUB")]
    else:
        assert router.recv_multipart()[1:] == PUB
    assert dict(proxy.stats().by_type).get("PUB") == 1
