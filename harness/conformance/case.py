"""Conformance case files: the role under test, the clauses checked, and a script of steps in
which the harness plays the other roles. Documented in docs/conformance.md.

    protocol: dcp
    role: broker
    case: broker answers ping with pong
    clauses: [dcp.heartbeat.pong]
    steps:
      - {as: worker.a, send: {type: REGISTER, service: echo}}
      - {as: worker.a, expect: {type: REGISTER, service: echo}, within: 500ms}
      - {as: worker.a, send: {type: PING}}
      - {as: worker.a, expect: {type: PONG}, within: 500ms}

Step kinds: ``send`` (a message: type + fields, the rest defaulted), ``send_raw`` (frames as
hex, for malformed input), ``expect`` (a message whose fields match, within a time; matchers
below; with ``first: true`` it must also be the first message the peer gets in the step, nothing
else before it; with ``latest: true`` the newest of the matching messages waiting is taken, e.g. the
request a client repeated last, the one it still waits an answer to), ``expect_nothing`` (no message, or none of a type, for a time; with
``at_most: N``, no more than N of them), ``wait``,
``restart_iut`` / ``kill_iut`` (process control), ``disconnect`` (a peer goes away),
``expect_subscription`` (publish/subscribe peers: the implementation holds, or takes within the
time, a subscription at the peer that lets such a message through — a case waits for what the
implementation observably does rather than for a fixed delay).

What the implementation hands its application is observed on its standard output, one JSON
object per line (what each protocol prints is in its conformance doc; lines that are not a
JSON object are ignored): ``expect_output`` (a line whose keys match, within a time; it takes
that line only, so lines may come in any order) and ``expect_no_output`` (no line matching the
keys, other than lines an ``expect_output`` already took, arrives before the step ends: e.g. no
second delivery of a message). Neither names a peer (no ``as``).

Field matchers in ``expect``: a plain value (equal; text is UTF-8 for byte fields),
``{hex: "00ff"}``, ``{pattern: "regex"}``, ``{any: true}`` (present, any value),
``{ref: "name.field"}`` (equal to a field of a message captured with ``capture: name``),
``{identity_of: "worker.a"}`` (equal to the routing identity of the connection between that
scripted peer and the implementation, as the ROUTER side sees it: a DEALER peer's own
identity, or the implementation's identity as a ROUTER peer received it),
``{not: value}``, ``{len: N}``, ``{one_of: [...]}``, ``{nonempty: true}``, ``{gt: value}``
(a number greater than the value, which may be a ``ref``), ``{has: matcher}`` (a repeated field
with at least one element that matches; the matcher may be a mapping of the element's fields,
``{has: {reqid: {ref: u.reqid}}}``), ``{iut_address: true}`` (one of the
addresses the implementation announced, e.g. in Dafka BEACONs: a node made of several, like
zeromq/dafka's store, announces one per part). ``not`` and ``one_of`` take values or matchers
(``{one_of: [null, {identity_of: broker.b}]}``). In ``send``, a field may be ``{ref: ...}``,
``{identity_of: ...}`` or ``{iut_address: true}`` (the announced address that a subscription of
the implementation lets the message through to), and ``{hex: ...}`` gives any bytes, also for
text fields that allow any bytes.

An ``expect`` may also match frames byte for byte where a decoded field cannot tell (a
MessagePack value re-encoded in other bytes): ``raw: {5: "cf0000000000000001"}`` (frame index,
after any routing identity -> hex); and ``first: true`` asks that the message be the next one
to arrive at the peer, with nothing else before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from harness.conformance.matchers import MATCHER_NAMES, is_field_mapping
from harness.packages.base import as_duration
from harness.protocols import PROTOCOLS, catalogue, codec
from harness.yamlsrc import Locations, SourceError, load, loads

CaseError = SourceError

STEP_KINDS = ("send", "send_raw", "expect", "expect_nothing", "wait", "restart_iut", "kill_iut", "disconnect",
              "expect_output", "expect_no_output", "expect_subscription")
TIMED_KINDS = ("expect", "expect_nothing", "wait", "expect_output", "expect_no_output", "expect_subscription")
MATCHERS = MATCHER_NAMES
RAW = "raw"  # an expect step's {frame index: hex}: the message's frames byte for byte (not a field)
DEFAULT_WITHIN_NS = 1_000_000_000


@dataclass
class Step:
    kind: str
    peer: str | None
    message: str | None = None  # message type for send/expect/expect_nothing
    fields: dict[str, Any] = field(default_factory=dict)  # send values or expect matchers
    frames: list[Any] | None = None  # send_raw: bytes, or {"ref": "capture.field"}
    within_ns: int = DEFAULT_WITHIN_NS  # expect deadline; expect_nothing/wait duration
    capture: str | None = None
    clause: str | None = None  # the clause this step checks (default: the case's first)
    field_clauses: dict[str, str] = field(default_factory=dict)  # expect: a mismatch here breaks that clause
    first: bool = False  # expect: the next message to arrive at the peer must be this one
    latest: bool = False  # expect: take the newest matching message waiting, not the oldest
    optional: str = ""  # expect: why the implementation may never send it (none in time skips the case)
    # expect, with ``optional``: none in time skips the case when a message of the step's type
    # matching these came instead (an answer the document allows that shows nothing to judge)
    skip_on: dict[str, Any] = field(default_factory=dict)
    # expect: the implementation may or may not send it; none in time goes on (its capture stays
    # unset, and a send that refers to it is left out: an answer to a request that never came)
    maybe: bool = False
    at_most: int = 0  # expect_nothing: how many matching messages the window allows (a count, not silence)
    raw: dict[int, bytes] = field(default_factory=dict)  # expect: frame index -> exact bytes
    line: int | None = None
    text: str = ""  # the step as written, for evidence


@dataclass
class Case:
    path: str
    protocol: str
    role: str
    name: str
    id: str  # file stem: stable, used to rerun one case
    clauses: list[str]
    steps: list[Step]
    peers: dict[str, str]  # scripted peer name -> its role
    dialects: list[str] | None = None  # None: any dialect
    iut: dict[str, Any] = field(default_factory=dict)  # placeholders for the IUT's command line
    description: str = ""
    # Placeholders of an optional feature: a live run whose command line leaves one of them out
    # skips the case (the implementation is taken not to have the feature).
    needs: list[str] = field(default_factory=list)


def _bytes_value(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"hex"}:
        return bytes.fromhex(str(v["hex"]).replace(" ", ""))
    return v


def case_from(data: Any, locs: Locations, path: str, peer_roles: dict[str, dict[str, str]]) -> Case:
    """Validate one case; ``peer_roles`` maps a role under test to {peer role prefix: peer role}."""
    if not isinstance(data, dict):
        raise locs.error((), "a conformance case must be a mapping")
    known = {"protocol", "role", "case", "clauses", "steps", "dialects", "iut", "description", "needs"}
    for k in data:
        if k not in known:
            raise locs.error((k,), f"unknown field (known: {', '.join(sorted(known))})")
    for k in ("protocol", "role", "case", "clauses", "steps"):
        if k not in data:
            raise locs.error((), f"missing required field '{k}'")
    protocol = data["protocol"]
    if protocol not in PROTOCOLS:
        raise locs.error(("protocol",), f"unknown protocol {protocol!r}")
    role = data["role"]
    if role not in peer_roles:
        raise locs.error(("role",), f"no conformance suite for {protocol} role {role!r} (roles: {', '.join(peer_roles)})")
    cat = catalogue(protocol)
    clauses = data["clauses"]
    if not isinstance(clauses, list) or not clauses:
        raise locs.error(("clauses",), "clauses must be a non-empty list of clause ids")
    for i, c in enumerate(clauses):
        if c not in cat:
            raise locs.error(("clauses", i), f"{c!r} is not a clause of the {protocol} catalogue")
    c = codec(protocol)
    dialects = data.get("dialects")
    steps_in = data["steps"]
    if not isinstance(steps_in, list) or not steps_in:
        raise locs.error(("steps",), "steps must be a non-empty list")
    steps: list[Step] = []
    peers: dict[str, str] = {}
    captures: set[str] = set()
    identity_refs: list[tuple[tuple[Any, ...], str]] = []  # (path, peer) of identity_of matchers
    for i, raw in enumerate(steps_in):
        p = ("steps", i)
        if not isinstance(raw, dict):
            raise locs.error(p, "a step must be a mapping")
        kinds = [k for k in STEP_KINDS if k in raw]
        if len(kinds) != 1:
            raise locs.error(p, f"each step needs exactly one of {', '.join(STEP_KINDS)}")
        kind = kinds[0]
        allowed = {kind, "as", "within", "capture", "for", "clause", "field_clauses"}
        if kind == "expect":
            allowed |= {"first", "latest", RAW, "optional", "skip_on", "maybe"}
        if kind == "expect_nothing":
            allowed.add("at_most")
        if kind in ("expect_output", "expect_no_output"):
            allowed -= {"as", "capture", "field_clauses"}
        for k in raw:
            if k not in allowed:
                raise locs.error(p + (k,), f"unknown step field (a {kind} step takes {', '.join(sorted(allowed))})")
        where = locs.of(p)
        step = Step(kind, None, line=where.line if where else None, text=_one_line(raw))
        if kind in ("send", "send_raw", "expect", "expect_nothing", "disconnect", "expect_subscription"):
            peer = raw.get("as") if kind != "disconnect" else raw.get("disconnect")
            if not isinstance(peer, str):
                raise locs.error(p, "name the scripted peer with 'as: <role>.<name>'")
            prole = peer.split(".")[0]
            if prole not in peer_roles[role]:
                raise locs.error(p + ("as",), f"a {role} under test talks to {', '.join(peer_roles[role])}; "
                                              f"{peer!r} is none of them")
            peers.setdefault(peer, peer_roles[role][prole])
            step.peer = peer
        if kind in ("send", "expect", "expect_nothing", "expect_subscription"):
            spec = raw[kind] if raw[kind] is not None else {}
            if not isinstance(spec, dict):
                raise locs.error(p + (kind,), "give the message as a mapping with 'type' and fields")
            spec = dict(spec)
            mtype = spec.pop("type", None)
            if mtype is None and kind != "expect_nothing":
                raise locs.error(p + (kind,), "missing 'type' (the message name)")
            if mtype is not None and mtype not in c.messages:
                raise locs.error(p + (kind, "type"), f"{protocol} has no message {mtype!r} (messages: {', '.join(c.messages)})")
            step.message = mtype
            if mtype is not None:
                names = set(c.complete(mtype))
                for f in spec:
                    if f not in names:
                        raise locs.error(p + (kind, f), f"{mtype} has no field {f!r} (fields: {', '.join(sorted(names))})")
            if kind == "expect_subscription":
                step.fields = {k: _normalise(c, mtype, k, _bytes_value(v)) for k, v in spec.items()}
            elif kind == "send":
                step.fields = {k: _normalise(c, mtype, k, _bytes_value(v)) for k, v in spec.items()}
                refs = list(refs_in(step.fields))
                for r in refs:
                    if str(r).split(".")[0] not in captures:
                        raise locs.error(p + (kind,), f"no earlier step captured a message named {str(r).split('.')[0]!r}")
                idents = [(f, v["identity_of"]) for f, v in step.fields.items()
                          if isinstance(v, dict) and set(v) == {"identity_of"}]
                identity_refs.extend((p + (kind, f), str(v)) for f, v in idents)
                announced = [f for f, v in step.fields.items() if isinstance(v, dict) and set(v) == {"iut_address"}]
                if not refs and not idents and not announced:  # values from the run are checked when the step runs
                    try:
                        c.encode(mtype, step.fields)
                    except ValueError as e:
                        raise locs.error(p + (kind,), str(e)) from None
            else:
                for f, m in spec.items():
                    _check_matcher(m, locs, p + (kind, f), captures, identity_refs)
                step.fields = spec
        if kind in ("expect_output", "expect_no_output"):
            spec = raw[kind] if raw[kind] is not None else {}
            if not isinstance(spec, dict) or (kind == "expect_output" and not spec):
                raise locs.error(p + (kind,), "give the keys of the output line to match, e.g. {sequence: 1}")
            for f, m in spec.items():
                _check_matcher(m, locs, p + (kind, f), captures, identity_refs)
            step.fields = dict(spec)
        if kind == "expect" and "optional" in raw:
            if not isinstance(raw["optional"], str) or not raw["optional"].strip():
                raise locs.error(p + ("optional",), "optional says why the message may never come (the skip's reason)")
            step.optional = raw["optional"]
        if "maybe" in raw:
            if raw["maybe"] is not True or step.optional:
                raise locs.error(p + ("maybe",), "maybe: true (a message that may or may not come; not with optional)")
            step.maybe = True
        if "skip_on" in raw:
            spec = raw["skip_on"]
            if not step.optional:
                raise locs.error(p + ("skip_on",), "skip_on needs optional: \"why\" (the skip's reason)")
            if not isinstance(spec, dict) or not spec:
                raise locs.error(p + ("skip_on",), "skip_on is a mapping of fields to matchers, like an expect's")
            names = set(c.complete(step.message or ""))
            for f, m in spec.items():
                if f not in names:
                    raise locs.error(p + ("skip_on", f), f"{step.message} has no field {f!r}")
                _check_matcher(m, locs, p + ("skip_on", f), captures, identity_refs)
            step.skip_on = dict(spec)
        if "at_most" in raw:
            if type(raw["at_most"]) is not int or raw["at_most"] < 1:
                raise locs.error(p + ("at_most",), "at_most is how many matching messages the window allows, "
                                                   "a positive integer (without it: none)")
            step.at_most = raw["at_most"]
        if kind == "send_raw":
            frames = raw["send_raw"]
            if not isinstance(frames, list):
                raise locs.error(p + ("send_raw",), "send_raw is a list of frames in hex ('' is an empty frame)")
            try:
                # {ref: capture.field}: that field of a captured message, encoded as its table
                # encodes it (a request id the implementation will recognise, around malformed frames)
                step.frames = [dict(f) if isinstance(f, dict) and set(f) == {"ref"}
                               else bytes.fromhex(str(f or "").replace(" ", "")) for f in frames]
            except ValueError:
                raise locs.error(p + ("send_raw",), "every frame must be hex or {ref: capture.field}") from None
            for f in step.frames:
                if isinstance(f, dict) and str(f["ref"]).split(".")[0] not in captures:
                    raise locs.error(p + ("send_raw",), f"no earlier step captured a message named "
                                                        f"{str(f['ref']).split('.')[0]!r}")
        if kind in TIMED_KINDS:
            key = "within" if kind in ("expect", "expect_output", "expect_subscription") else "for"
            value = raw.get(key, raw.get("within", raw.get(kind) if kind == "wait" else None))
            if value is None and kind not in ("expect", "expect_output", "expect_subscription"):
                raise locs.error(p, f"a {kind} step needs 'for: <duration>'")
            if value is not None:
                try:
                    step.within_ns = as_duration(value)
                except ValueError as e:
                    raise locs.error(p + (key,), str(e)) from None
        if RAW in raw:
            step.raw = _raw_frames(raw[RAW], locs, p + (RAW,))
        if "clause" in raw:
            if raw["clause"] not in cat:
                raise locs.error(p + ("clause",), f"{raw['clause']!r} is not a clause of the {protocol} catalogue")
            step.clause = raw["clause"]
        if "field_clauses" in raw:
            fc = raw["field_clauses"]
            if kind != "expect" or not isinstance(fc, dict):
                raise locs.error(p + ("field_clauses",), "field_clauses maps fields of an expect step to clause ids")
            for f, cl in fc.items():
                if cl not in cat:
                    raise locs.error(p + ("field_clauses", f), f"{cl!r} is not a clause of the {protocol} catalogue")
                if f not in step.fields and not (f == RAW and step.raw):
                    raise locs.error(p + ("field_clauses", f), f"the step does not match field {f!r}")
            step.field_clauses = dict(fc)
        if "first" in raw:
            if not isinstance(raw["first"], bool):
                raise locs.error(p + ("first",), "first is true or false")
            step.first = raw["first"]
        if "latest" in raw:
            if not isinstance(raw["latest"], bool) or (raw["latest"] and step.first):
                raise locs.error(p + ("latest",), "latest is true or false, and not with first: true")
            step.latest = raw["latest"]
        if "capture" in raw:
            if kind != "expect":
                raise locs.error(p + ("capture",), "only an expect step can capture a message")
            step.capture = str(raw["capture"])
            captures.add(step.capture)
        steps.append(step)
    for where_, peer_ in identity_refs:
        if peer_ not in peers:
            raise locs.error(where_, f"identity_of names {peer_!r}, which no step of this case plays "
                                     f"(peers: {', '.join(peers)})")
    iut = data.get("iut") or {}
    if not isinstance(iut, dict):
        raise locs.error(("iut",), "iut must be a mapping of placeholder values")
    needs = data.get("needs") or []
    if not isinstance(needs, list) or not all(isinstance(n, str) and re.fullmatch(r"\w+", n) for n in needs):
        raise locs.error(("needs",), "needs must be a list of placeholder names (broadcast_url, not {broadcast_url})")
    stem = re.sub(r"\.ya?ml$", "", path.replace("\\", "/").rsplit("/", 1)[-1])
    return Case(path, protocol, role, str(data["case"]), stem, list(clauses), steps, peers,
                list(dialects) if dialects else None, iut, str(data.get("description", "")), list(needs))


def _normalise(c: Any, mtype: str, field_name: str, value: Any) -> Any:
    """YAML gives text; byte fields (and lists of them) take it as UTF-8."""
    from harness.protocols.types import Raw

    from harness.protocols.types import Text

    t = c.table.fields[field_name].type
    if isinstance(t, Text) and getattr(t, "any_bytes", False) and isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")  # {hex: ...} for a field of any bytes
    if isinstance(value, str) and isinstance(getattr(t, "default", None), bytes):
        return value.encode()  # any field of bytes (a PPPP channel) takes text as UTF-8
    if isinstance(t, Raw):
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, list):
            return [v.encode() if isinstance(v, str) else _bytes_value(v) for v in value]
    return value


def refs_in(value: Any) -> Any:
    """Every ``{ref: capture.field}`` in a send's values, also inside lists and mappings (a
    Raft log entry built from a captured request)."""
    if isinstance(value, dict):
        if set(value) in ({"ref"}, {"ref", "add"}):  # add: a whole number to add to the captured one
            yield value["ref"]
            return
        for v in value.values():
            yield from refs_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from refs_in(v)


def _check_matcher(m: Any, locs: Locations, p: tuple[Any, ...], captures: set[str],
                   identity_refs: list[tuple[tuple[Any, ...], str]] | None = None) -> None:
    if isinstance(m, dict) and len(m) == 1:
        (k, v), = m.items()
        if k not in MATCHERS:
            raise locs.error(p, f"unknown matcher {k!r} (matchers: {', '.join(MATCHERS)})")
        if k == "not":
            _check_matcher(v, locs, p + (k,), captures, identity_refs)
        if k == "has":
            for f, fm in (v.items() if is_field_mapping(v) else [((), v)]):
                _check_matcher(fm, locs, p + (k, f) if f != () else p + (k,), captures, identity_refs)
        if k == "gt":
            if isinstance(v, dict) and set(v) == {"ref"}:
                _check_matcher(v, locs, p + (k,), captures, identity_refs)
            elif isinstance(v, bool) or not isinstance(v, int):
                raise locs.error(p, "gt takes a whole number or {ref: capture.field}")
        if k == "one_of":
            if not isinstance(v, list):
                raise locs.error(p, "one_of takes a list of values or matchers")
            for i, x in enumerate(v):
                _check_matcher(x, locs, p + (k, i), captures, identity_refs)
        if k == "identity_of":
            if not isinstance(v, str):
                raise locs.error(p, "identity_of names a scripted peer, e.g. 'client.c'")
            if identity_refs is not None:
                identity_refs.append((p, v))
        if k == "pattern":
            try:
                re.compile(str(v))
            except re.error as e:
                raise locs.error(p, f"bad pattern: {e}") from None
        if k == "ref":
            name = str(v).split(".")[0]
            if name not in captures:
                raise locs.error(p, f"no earlier step captured a message named {name!r}")
        if k == "hex":
            try:
                bytes.fromhex(str(v).replace(" ", ""))
            except ValueError:
                raise locs.error(p, "hex matcher needs hex digits") from None


def _raw_frames(value: Any, locs: Locations, p: tuple[Any, ...]) -> dict[int, bytes]:
    if not isinstance(value, dict) or not value:
        raise locs.error(p, "raw maps frame indexes to hex: {5: 'cf00000000000000 01'}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise locs.error(p + (k,), "a frame index is a whole number >= 0")
        try:
            out[k] = bytes.fromhex(str(v).replace(" ", ""))
        except ValueError:
            raise locs.error(p + (k,), "the frame must be hex") from None
    return out


def _one_line(raw: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in raw.items())[:200]


def load_case(path: str, peer_roles: dict[str, dict[str, str]]) -> Case:
    data, locs = load(path)
    return case_from(data, locs, path, peer_roles)


def parse_case(text: str, peer_roles: dict[str, dict[str, str]], path: str = "<case>") -> Case:
    data, locs = loads(text, path)
    return case_from(data, locs, path, peer_roles)
