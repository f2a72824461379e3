"""The ``corrupt`` effect: damage drawn from the generator handed in (same seed, same bytes),
kept within one message, malformed for the protocol's codec, and written in rules as the other
effects are."""

from __future__ import annotations

import random

import pytest

from fault_injection.damage import HEADER_BYTES, HOWS, KNOWN_HOWS, TRIES, damage
from fault_injection.naming import codec_malformed
from fault_injection.rules import Corrupt, FaultSpecError, RuleSet, rule_from_dict
from harness.protocols import codec

DCP = codec("dcp")
REQUEST = DCP.encode("REQUEST", {"service": "echo", "client_address": b"client-1",
                                 "metadata": [], "data": [b"0123456789abcdef"]})


@pytest.mark.parametrize("how", KNOWN_HOWS)
def test_each_damage_changes_the_bytes_within_one_message(how: str) -> None:
    for seed in range(20):
        done = damage(REQUEST, random.Random(seed), (how,))
        assert done is not None
        frames, what = done
        assert frames != REQUEST and what
        assert all(isinstance(f, bytes) for f in frames) and frames  # still one message of frames
        if how in ("truncate", "flip", "garbage", "header"):
            assert len(frames) == len(REQUEST)
        elif how == "drop_frame":
            assert len(frames) == len(REQUEST) - 1
        else:
            assert len(frames) == len(REQUEST) + 1


def test_a_header_damage_is_a_near_miss_in_the_first_bytes_of_a_frame() -> None:
    """Another version, a neighbouring signature: Dafka's AA A5 becomes ZRE's AA A0 in some draws,
    and version 1 another version in others; nothing past a frame's fourth byte changes."""
    record = codec("dafka").encode("RECORD", {"topic": "orders", "address": "p" * 36, "subject": "orders",
                                              "sequence": 3, "content": b"x" * 32})
    seen = set()
    for seed in range(400):
        frames, _ = damage(record, random.Random(seed), ("header",))
        changed = [(i, k) for i, f in enumerate(frames) for k in range(len(f)) if f[k] != record[i][k]]
        assert len(changed) == 1 and changed[0][1] < HEADER_BYTES
        seen.add(bytes(frames[1][:4]))
    assert record[1][:4] == b"\xaa\xa5M\x01"
    assert b"\xaa\xa0M\x01" in seen and b"\xaa\xa5M\x02" in seen


def test_header_is_drawn_only_when_named() -> None:
    assert "header" not in HOWS and rule_from_dict({"corrupt": "header"}).effect.how == ("header",)


def test_same_seed_same_bytes() -> None:
    draws = [[damage(REQUEST, rng) for _ in range(50)] for rng in (random.Random(7), random.Random(7))]
    assert draws[0] == draws[1]
    assert draws[0] != [damage(REQUEST, random.Random(8)) for _ in range(50)]


def test_a_damaged_message_is_malformed_for_the_codec() -> None:
    malformed = codec_malformed("dcp")
    assert not malformed(REQUEST)
    rng = random.Random(3)
    for _ in range(200):
        done = damage(REQUEST, rng, HOWS, malformed)
        assert done is not None and malformed(done[0])


def test_no_damage_is_delivered_when_every_try_still_decodes() -> None:
    tries: list[list[bytes]] = []

    def never(frames: list[bytes]) -> bool:
        tries.append(frames)
        return False

    assert damage(REQUEST, random.Random(1), HOWS, never) is None
    assert len(tries) == TRIES
    # One frame: it cannot be dropped (ZeroMQ has no message of no frames); the others apply.
    assert damage([b"x"], random.Random(1), ("drop_frame",)) is None


def test_a_corrupt_rule_in_every_written_form() -> None:
    assert rule_from_dict({"message": "PUBLISH", "corrupt": "5%"}).effect == Corrupt()
    assert rule_from_dict({"message": "PUBLISH", "corrupt": "5%"}).probability == 0.05
    assert rule_from_dict({"corrupt": True}).effect.how == HOWS
    assert rule_from_dict({"corrupt": "truncate"}).effect == Corrupt(("truncate",))
    assert rule_from_dict({"corrupt": ["flip", "garbage"]}).effect == Corrupt(("flip", "garbage"))
    r = rule_from_dict({"corrupt": {"how": "add_frame", "probability": "10%"}, "nth": 2})
    assert r.effect == Corrupt(("add_frame",)) and r.probability == 0.1 and r.nth == frozenset({2})
    v = RuleSet([r]).decide("a", "b", "X", "s", "to_binder", random.Random(0))
    assert v.effect == "pass"  # nth: 2, the first passes
    v = RuleSet([rule_from_dict({"corrupt": "flip"})]).decide("a", "b", "X", "s", "to_binder", random.Random(0))
    assert (v.effect, v.label, v.how) == ("corrupt", "corrupt:rule-0", ("flip",))


@pytest.mark.parametrize("item,message", [
    ({"corrupt": "trunc"}, "rule 0: corrupt: no damage 'trunc' (known: truncate, flip, drop_frame, add_frame, garbage, header)"),
    ({"corrupt": {"hw": "flip"}}, "rule 0: corrupt.hw: unknown key 'hw'; did you mean 'how'?"),
    ({"corrupt": {"how": []}}, "rule 0: corrupt.how: no damage named"),
    ({"corrupt": 3}, "rule 0: corrupt: expected a damage or a list of them"),
    ({"corrupt": True, "drop": True}, "more than one effect (corrupt and drop)"),
])
def test_bad_corrupt_rules_name_the_problem(item: dict, message: str) -> None:
    with pytest.raises(FaultSpecError, match=None) as info:
        rule_from_dict(item)
    assert message in str(info.value)
