"""The one decode dispatcher: which compiled decoder a multipart message goes to.

Every decode of a `Codec` goes through `Dispatcher.decode` — ``Codec.decode`` is that
function, ``Codec.validate`` calls it, and the strict codec consults its dialects through their
own. It is generated once per table (constants inlined, see `_generate`) and has two halves:

* the fast pick: a message named by ``as_`` goes to its decoder; otherwise one dictionary
  look-up on the command id (at the byte location that best separates the table's messages,
  per channel when one is given) names the only possible message, or the table's one keyless
  layout does;
* `search`, when there is no fast pick or its decoder raised `DecodeError`: every candidate
  message tried in order, the most telling error reported, and — for the strict codec — the
  deployed dialects consulted, so bytes only a dialect accepts raise `ConformanceError`.

The fast pick only ever returns what `search` would return (it picks the candidate `search`
tries first, and only when it is the sole candidate at its key), so the halves cannot disagree.
Decoding raises `DecodeError` and nothing else: compiled decoders already convert codec bugs
to ``DecodeError(internal=True)``, and `search` does the same for its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from harness.protocols.decode_failures import CODEC_BUGS, internal_error
from harness.protocols.errors import ConformanceError, DecodeError
from harness.protocols.message import Message
from harness.protocols.table import Const, Lit, Message as MessageSpec, Packed, Table

if TYPE_CHECKING:
    from harness.protocols.codec import Codec

Location = tuple[int, int, "int | None"]  # (frame, byte offset, length; None = the whole frame)


def message_keys(table: Table, msg: MessageSpec) -> Iterable[tuple[Location, bytes]]:
    """The literals that identify a message, at fixed places before any variable part: whole
    ``Const`` frames and ``Lit`` parts at fixed byte offsets."""
    for idx, el in enumerate(msg.layout):
        if isinstance(el, Const):
            yield (idx, 0, None), el.value
        elif isinstance(el, Packed):
            off = 0
            for p in el.parts:
                if isinstance(p, Lit):
                    yield (idx, off, len(p.value)), p.value
                    off += len(p.value)
                else:
                    t = table.fields[p].type
                    if getattr(t, "size", None) is None:
                        break
                    off += t.size
        elif not isinstance(el, str):
            return


class Dispatcher:
    """The index of a codec's messages by their identifying bytes, and the decode function
    built on it."""

    def __init__(self, codec: "Codec", decoders: dict[str, Callable[[Sequence[bytes]], Message]]) -> None:
        self.codec = codec  # read at decode time: `alternatives` is set after construction
        self.table = codec.table
        self.decoders = decoders
        self._build_index()
        self.decode: Callable[..., Message] = self._generate()

    # ---- the index -----------------------------------------------------------------------

    def _build_index(self) -> None:
        """Index messages by the literal bytes that identify them.

        Each message is indexed at the key location that best separates the table's messages
        (most distinct values: the command id, not a shared signature); messages without keys
        are the fallback.
        """
        messages = self.table.messages
        all_keys = {m.name: list(message_keys(self.table, m)) for m in messages}
        values: dict[Location, set[bytes]] = {}
        for keys in all_keys.values():
            for loc, value in keys:
                values.setdefault(loc, set()).add(value)
        keyed: dict[Location, dict[bytes, list[str]]] = {}
        self.fallback: list[str] = []
        for msg in messages:
            keys = all_keys[msg.name]
            if not keys:
                self.fallback.append(msg.name)
                continue
            loc, value = max(keys, key=lambda kv: (len(values[kv[0]]), -kv[0][0], -kv[0][1]))
            keyed.setdefault(loc, {}).setdefault(value, []).append(msg.name)
        self.locations = sorted(keyed.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1]))
        self.channels = {m.name: m.channels for m in messages}
        # The fast pick: the main location's keys that name exactly one message, when no
        # keyless message could also match (those need the full candidate search).
        self.fast = self._fast_pick(None)
        all_channels = dict.fromkeys(c for m in messages for c in m.channels)
        self.fast_by_channel = {c: self._fast_pick(c) for c in all_channels}

    def _fast_pick(self, channel: str | None) -> tuple[Any, ...] | None:
        """(frame, offset, length, key -> decoder, the one keyless decoder or None) for the
        messages on ``channel`` (None: all), or None when only the search can tell."""
        if not self.locations:
            keyless = [m for m in self.fallback if channel is None or self.on_channel(m, channel)]
            return (0, 0, 0, {}, self.decoders[keyless[0]]) if len(keyless) == 1 else None
        (fi, off, ln), index = self.locations[0]
        names = {k: [m for m in v if channel is None or self.on_channel(m, channel)] for k, v in index.items()}
        # key -> decoder; None for keys that need the full search (several candidates, or a key
        # that exists but not on this channel): `index.get(key, single)` is then the whole pick.
        direct: dict[bytes, Any] = {k: (self.decoders[v[0]] if len(v) == 1 else None) for k, v in names.items()}
        # Keys at other locations would need the full search: only then no keyless shortcut.
        keyless = [m for m in self.fallback if channel is None or self.on_channel(m, channel)]
        single = self.decoders[keyless[0]] if len(keyless) == 1 and len(self.locations) == 1 else None
        return (fi, off, ln, direct, single)

    def on_channel(self, name: str, channel: str) -> bool:
        channels = self.channels[name]
        return not channels or channel in channels

    def candidates(self, frames: Sequence[bytes], channel: str | None = None) -> list[str]:
        """Names of the messages these frames could be, most specific first."""
        n = len(frames)
        found: list[str] = []
        for (fi, off, ln), index in self.locations:
            if fi >= n:
                continue
            f = frames[fi]
            key = bytes(f) if ln is None else bytes(f[off : off + ln])
            names = index.get(key)
            if names:
                found.extend(names)
        if channel is not None:
            found = [m for m in found if self.on_channel(m, channel)]
        if found:
            return found  # a command id matched: keyless layouts are not tried behind it
        fallback = self.fallback
        if channel is not None:
            fallback = [m for m in fallback if self.on_channel(m, channel)]
        return list(fallback)

    # ---- the dispatcher --------------------------------------------------------------------

    def _generate(self) -> Callable[..., Message]:
        """The decode function of this table: the fast pick with its constants inlined, then
        the compiled decoder, then `search` when there is no pick or the pick failed."""
        table = self.table
        by_channel = {c: (t[3], t[4]) for c, t in self.fast_by_channel.items() if t is not None}
        if self.locations:
            fi, off, ln = self.locations[0][0]
            key = f"f[{fi}]" if ln is None else f"f[{fi}][{off}:{off + ln}]"
            main = f"INDEX.get({key}, SINGLE) if len(f) > {fi} else SINGLE"
            on_channel = f"t[0].get({key}, t[1]) if len(f) > {fi} else t[1]"
        else:  # no command ids: at most one keyless layout (per channel) to go to
            main, on_channel = "SINGLE", "t[1]"
        fast = self.fast or (0, 0, 0, {}, None)
        src = (
            "def decode(f, *, as_=None, channel=None):\n"
            "    if as_ is not None:\n"
            "        dec = DECODERS.get(as_)\n"
            "    elif channel is None:\n"
            f"        dec = {main}\n"
            "    else:\n"
            "        t = CHANNELS.get(channel)\n"
            f"        dec = None if t is None else {on_channel}\n"
            "    if dec is not None:\n"
            "        try:\n"
            "            return dec(f)\n"
            "        except DecodeError:\n"
            "            pass  # not necessarily the error to report: the search chooses (and consults dialects)\n"
            "    return SEARCH(f, as_, channel)\n"
        )
        ns: dict[str, Any] = {
            "DECODERS": self.decoders, "INDEX": fast[3], "SINGLE": fast[4], "CHANNELS": by_channel,
            "SEARCH": self.search, "DecodeError": DecodeError,
        }
        exec(compile(src, f"<{table.protocol}:{table.dialect}:decode>", "exec"), ns)  # noqa: S102
        return ns["decode"]

    def search(self, frames: Sequence[bytes], as_: str | None, channel: str | None) -> Message:
        """The dispatcher's second half: decode by trying every candidate; when none decodes,
        raise the most telling DecodeError — or, if a dialect of the strict codec accepts the
        bytes, ConformanceError."""
        try:
            return self._search(frames, as_, channel)
        except DecodeError as e:
            alternatives = self.codec.alternatives
            if alternatives:
                accepted: list[str] = []
                decoded: Message | None = None
                for alt in alternatives:
                    try:
                        m = alt.decode(frames, as_=as_, channel=channel)
                    except DecodeError:
                        continue  # this dialect rejects the bytes too
                    accepted.append(alt.dialect)
                    decoded = decoded or m
                if decoded is not None:
                    raise ConformanceError(e, accepted, decoded) from None
            raise

    def _search(self, frames: Sequence[bytes], as_: str | None, channel: str | None) -> Message:
        table = self.table
        try:
            if as_ is not None:
                dec = self.decoders.get(as_)
                if dec is None:
                    raise DecodeError(table.protocol, table.dialect, as_, None, f"no message named {as_!r}",
                                      table.grammar_clause)
                return dec(frames)
            names = self.candidates(frames, channel)
            if not names:
                raise DecodeError(table.protocol, table.dialect, None, None, self._unknown_reason(frames),
                                  table.unknown_clause or table.grammar_clause)
            if len(names) > 1 and self._ambiguous(names):
                raise DecodeError(
                    table.protocol, table.dialect, None, None,
                    f"cannot tell {' / '.join(names)} apart without knowing the socket or direction;"
                    " name the message (as_=..., --as) or the channel",
                    table.grammar_clause,
                )
            errors: list[DecodeError] = []
            for name in names:
                try:
                    return self.decoders[name](frames)
                except DecodeError as e:
                    if e.internal:
                        raise
                    errors.append(e)
            # A command id matched but nothing decoded. Keyless layouts may not succeed behind it,
            # but their errors count when choosing which failure to report.
            for name in self.fallback:
                if name not in names and (channel is None or self.on_channel(name, channel)):
                    try:
                        self.decoders[name](frames)
                    except DecodeError as e:
                        if e.internal:
                            raise
                        errors.append(e)
            # Report the candidate whose frame count fitted (its error is about content).
            fitting = [e for e in errors if not getattr(e, "structural", False)]
            raise (fitting or errors)[0]
        except DecodeError:
            raise
        except CODEC_BUGS as e:  # a bug of the search itself: still only DecodeError leaves the codec
            raise internal_error(table, as_, e) from e

    def _ambiguous(self, names: list[str]) -> bool:
        # Keyless messages that all could match are ambiguous; a keyed one wins over fallbacks.
        keyed = [n for n in names if n not in self.fallback]
        return not keyed and len(names) > 1

    def _unknown_reason(self, frames: Sequence[bytes]) -> str:
        if not frames:
            return "no frames"
        known = []
        for (fi, off, ln), index in self.locations:
            where = f"frame {fi}" + ("" if ln is None else f" bytes {off}..{off + ln - 1}")
            if fi < len(frames):
                f = frames[fi]
                got = repr(bytes(f) if ln is None else bytes(f[off : off + ln]))
            else:
                got = f"missing (only {len(frames)} frame(s))"
            known.append(f"{where} = {got}, expected one of {sorted(index)!r}")
        return "unknown message: " + "; ".join(known) if known else "unknown message"
