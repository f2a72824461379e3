"""Damaging one message's frames: the ``corrupt`` effect of a message rule.

Ground floor (no simulator, no sockets): the simulator and the live ZMTP proxy damage messages
the same way, from the random generator the caller hands in, so the same seed gives the same
bytes. ZeroMQ never splits or merges messages, so the damage stays within the one message:

    truncate     cut one frame short (possibly to nothing)
    flip         flip one to four bytes of one frame
    drop_frame   remove one frame (a message of one frame keeps it)
    add_frame    insert a frame of random bytes somewhere
    garbage      replace one frame by random bytes of a random length
    header       a near miss in one of the first four bytes of one frame, where protocols keep
                 their signature, version and type code: XORed with 1..7 (another version
                 number, a neighbouring protocol's signature such as ZRE's AA A0 for Dafka's
                 AA A5). Drawn only when named: the default draws stay what they were.

A damaged message must be malformed, not another well-formed message: a protocol without
checksums cannot tell a flipped term number from a true one, so delivering a damaged message
that still decodes would test nothing a correct implementation can do. ``damage`` therefore
takes the protocol's ``malformed`` test (the codec's: no dialect decodes the frames) and draws
again, a few times, when the damage left a message that decodes; when every try still decodes
it gives up and the message passes untouched (the trace says so).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

HOWS = ("truncate", "flip", "drop_frame", "add_frame", "garbage")  # drawn when a rule names none
KNOWN_HOWS = (*HOWS, "header")
HEADER_BYTES = 4  # the bytes of a frame a header damage may change
HEADER_XOR = 7  # a near miss: the low three bits (Dafka AA A5 ^ 05 = ZRE AA A0; version 1 becomes 0, 2..7)
TRIES = 8  # draws before a message that keeps decoding is let through untouched
MAX_ADDED = 16  # longest added frame
MAX_GARBAGE = 64  # longest garbage frame

Malformed = Callable[[list[bytes]], bool]
TypedMalformed = Callable[[list[bytes], str], bool]  # the same, told the message's type (naming.codec_malformed)


def check_hows(hows: Sequence[str]) -> tuple[str, ...]:
    """The damage kinds as given, checked (a ValueError names the unknown one)."""
    out = tuple(dict.fromkeys(hows))
    if not out:
        raise ValueError(f"no damage named; give one or more of {', '.join(HOWS)}")
    for how in out:
        if how not in KNOWN_HOWS:
            raise ValueError(f"no damage {how!r} (known: {', '.join(KNOWN_HOWS)})")
    return out


def _randbytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def _apply(frames: list[bytes], how: str, rng: random.Random) -> tuple[list[bytes], str] | None:
    """One damage of kind ``how``, or None when it cannot apply to these frames."""
    out = list(frames)
    if how == "truncate":
        sized = [i for i, f in enumerate(out) if f]
        if not sized:
            return None
        i = rng.choice(sized)
        n = rng.randrange(len(out[i]))
        out[i] = out[i][:n]
        return out, f"frame {i} truncated from {len(frames[i])} to {n} bytes"
    if how == "flip":
        sized = [i for i, f in enumerate(out) if f]
        if not sized:
            return None
        i = rng.choice(sized)
        body = bytearray(out[i])
        positions = sorted(rng.sample(range(len(body)), min(len(body), rng.randint(1, 4))))
        for p in positions:
            body[p] ^= rng.randint(1, 255)
        out[i] = bytes(body)
        return out, f"frame {i}: byte(s) {', '.join(map(str, positions))} flipped"
    if how == "drop_frame":
        if len(out) < 2:
            return None  # ZeroMQ has no message of no frames
        i = rng.randrange(len(out))
        del out[i]
        return out, f"frame {i} of {len(frames)} dropped"
    if how == "add_frame":
        i = rng.randint(0, len(out))
        out.insert(i, _randbytes(rng, rng.randint(0, MAX_ADDED)))
        return out, f"a frame of {len(out[i])} random bytes added at {i}"
    if how == "header":
        sized = [i for i, f in enumerate(out) if f]
        if not sized:
            return None
        i = rng.choice(sized)
        p = rng.randrange(min(HEADER_BYTES, len(out[i])))
        body = bytearray(out[i])
        body[p] ^= rng.randint(1, HEADER_XOR)
        out[i] = bytes(body)
        return out, f"frame {i}: header byte {p} changed from 0x{frames[i][p]:02x} to 0x{body[p]:02x}"
    if how == "garbage":
        i = rng.randrange(len(out))
        out[i] = _randbytes(rng, rng.randint(0, MAX_GARBAGE))
        return out, f"frame {i} replaced by {len(out[i])} random bytes"
    raise ValueError(f"no damage {how!r}")


def damage(frames: Sequence[bytes], rng: random.Random, hows: Sequence[str] = HOWS,
           malformed: Malformed | None = None) -> tuple[list[bytes], str] | None:
    """The frames damaged (one kind of damage drawn from ``hows``) and what was done, or None
    when no try left them ``malformed`` (then the message should pass untouched).
    ``malformed=None`` accepts any damage that changed the bytes."""
    original = list(frames)
    for _ in range(TRIES):
        done = _apply(original, rng.choice(list(hows)), rng)
        if done is None or done[0] == original:
            continue
        if malformed is None or malformed(done[0]):
            return done
    return None


__all__ = ["HOWS", "KNOWN_HOWS", "Malformed", "TRIES", "TypedMalformed", "check_hows", "damage"]
