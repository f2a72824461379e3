"""Event BUS checks with clients that run as external processes (E-EVENTBUS-18): an external
client reports no deliveries, so the checks of what clients apply name it as not judged instead
of failing it as "never synchronised"; what the reference server's probe shows is still judged;
and each failure of `convergence` names the server MUST it proves. The events are fed as a live
run produces them: the in-process nodes' probes, nothing from the external client."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, DELIVER, NOTE, PAUSE, RECV, RESTART, RESUME, SEND, Event, Verdict
from harness.checkers.eventbus import ClientSubtrees, CompleteDelivery, Convergence
from harness.protocols import codec

C = codec("eventbus", "strict")
UUIDS = ["0c2f7b4e-8d1a-4f6e-9b3a-5d6c7e8f9a0" + str(i) for i in range(10)]
SUBTREES = {"app": ["/w/"], "outside": ["/w/"]}


def pub(t: int, i: int, topic: str = "/w/x") -> Event:
    """The reference server's collector takes a PUB (routing id first and no message type, as its
    probe reports it)."""
    frames = C.encode("PUB", {"topic": topic, "sequence": i, "producer": "app", "uuid": UUIDS[i],
                              "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
    return Event(t, "bus", "server", RECV, "collector", [b"app", *frames], codec=C)


def broadcast(t: int, i: int, topic: str = "/w/x") -> Event:
    frames = C.encode("BROADCAST", {"topic": topic, "sequence": i, "producer": "app", "uuid": UUIDS[i],
                                    "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
    return Event(t, "bus", "server", SEND, "publisher", frames, "BROADCAST", codec=C)


def applied(t: int, node: str, i: int, topic: str = "/w/x", source: str = "broadcast") -> Event:
    return Event(t, node, "client", DELIVER, msg_type="event",
                 data={"uuid": UUIDS[i], "topic": topic, "sequence": i, "source": source})


def synced(t: int, node: str) -> Event:
    return Event(t, node, "client", NOTE, msg_type="synced", data={"sequence": 0, "server": 0})


def server_up(t: int = 0) -> Event:
    return Event(t, "bus", "server", NOTE, msg_type="ha-state", data={"state": "primary"})


def status(t: int, held: list[int]) -> Event:
    return Event(t, "bus", "server", DELIVER, msg_type="server-status",
                 data={"state": "primary", "events": [(i, UUIDS[i], "/w/x") for i in held]})


def verdict(checker: Convergence | CompleteDelivery | ClientSubtrees, events: list[Event]) -> Verdict:
    for ev in events:
        checker.on_event(ev)
    [v] = checker.finish(10_000)
    return v


def run_with_outside_client() -> list[Event]:
    """A reference server, an in-process client that gets both events, and 'outside', an
    external client: the probes report nothing of it."""
    return [server_up(), synced(10, "app"), pub(20, 1), broadcast(20, 1), applied(21, "app", 1),
            pub(30, 2), broadcast(30, 2), applied(31, "app", 2), status(9_000, [1, 2])]


def test_an_external_client_is_not_judged_and_the_verdict_says_so() -> None:
    # before: "1 client(s) differ from the bus: outside never synchronised" (both checks)
    conv = verdict(Convergence(SUBTREES, external=["outside"]), run_with_outside_client())
    full = verdict(CompleteDelivery(SUBTREES, servers=["bus"], external=["outside"]), run_with_outside_client())
    for v in (conv, full):
        assert v.ok and "not judged: outside (external: what it applies is not on the wire)" in v.detail, v.detail
    # an in-process client that never synchronised still fails
    conv = verdict(Convergence(SUBTREES), run_with_outside_client())
    assert not conv.ok and "outside never synchronised" in conv.detail
    assert conv.clause == "eventbus.server.sync-response"


def test_a_pub_the_server_took_and_never_broadcast_fails_whoever_the_clients_are() -> None:
    # every client external: the reference server's probe still shows what it did with a PUB
    everyone = {"outside": ["/w/"]}
    events = [server_up(), pub(20, 1), broadcast(20, 1), pub(30, 2)]
    v = verdict(CompleteDelivery(everyone, servers=["bus"], external=["outside"]), events)
    assert not v.ok and "bus took 1 PUB(s) it never broadcast" in v.detail and v.clause == "eventbus.server.broadcast"
    # ... unless the server's life ended before it could (it need not keep the event, E-EVENTBUS-09)
    ended = [*events, Event(40, "bus", "server", CRASH), Event(50, "bus", "server", RESTART)]
    assert verdict(CompleteDelivery(everyone, servers=["bus"], external=["outside"]), ended).ok


def test_what_an_external_client_published_just_before_the_end_is_in_flight() -> None:
    # The slow live test eb-crash-pubs (stand-in publishing clients) failed once: "... (accepted by
    # bus at 7006.8 ms)" of a 7 s run. Only the server's receipt showed when the external client
    # published, and the probe names no receipt's type: the in-flight window never applied.
    def run(accepted_ms: int) -> Verdict:
        t = accepted_ms * 1_000_000
        events = [server_up(), synced(10, "app"), pub(t, 1), broadcast(t, 1)]
        check = CompleteDelivery(SUBTREES, servers=["bus"], external=["outside"], in_flight_ms={"app": 500})
        for ev in events:
            check.on_event(ev)
        [v] = check.finish(7_000_000_000)
        return v

    late = run(6_900)
    assert late.ok and "still in flight when the run ended" in late.detail, late.detail
    early = run(5_000)  # two seconds before the end: owed
    assert not early.ok and "app never got 1 event(s)" in early.detail, early.detail


def test_each_convergence_failure_names_the_clause_it_proves() -> None:
    base = [server_up(), synced(10, "app"), broadcast(20, 1), applied(21, "app", 1)]
    missing = verdict(Convergence({"app": ["/w/"]}), [*base, status(9_000, [1, 2])])
    assert not missing.ok and missing.clause == "eventbus.server.sync-response", missing
    foreign_sync = verdict(Convergence({"app": ["/w/"]}),
                           [*base, applied(30, "app", 3, "/n/y", "sync"), status(9_000, [1])])
    assert not foreign_sync.ok and foreign_sync.clause == "eventbus.server.sync-subtree-filter", foreign_sync
    never_had = verdict(Convergence({"app": ["/w/"]}), [*base, status(9_000, [])])
    assert not never_had.ok and never_had.clause == "eventbus.server.broadcast", never_had
    # another subtree's BROADCAST applied is the client's own doing: the opt-in SHOULD, not convergence
    foreign_broadcast = [*base, applied(30, "app", 3, "/n/y"), status(9_000, [1])]
    assert verdict(Convergence({"app": ["/w/"]}), foreign_broadcast).ok
    should = verdict(ClientSubtrees({"app": ["/w/"]}), foreign_broadcast)
    assert not should.ok and should.level == "SHOULD" and should.clause == "eventbus.client.apply-after-syncend"


def test_clients_of_a_server_that_forgot_its_events_in_a_restart_agree_on_what_they_must() -> None:
    # servers not reference nodes: the bus's holdings are the clients'; 'late' synchronised only
    # after the server restarted, so it need not hold what the server had before (E-EVENTBUS-09)
    subtrees = {"early": ["/w/"], "late": ["/w/"]}
    events = [synced(10, "early"), applied(20, "early", 1), Event(30, "bus", "server", RESTART),
              synced(40, "late"), applied(50, "early", 2), applied(51, "late", 2)]
    assert verdict(Convergence(subtrees), events).ok
    # before the restart, the same gap is a snapshot that lacks an event
    lacking = [synced(10, "early"), applied(20, "early", 1), synced(40, "late"), applied(50, "early", 2),
               applied(51, "late", 2)]
    v = verdict(Convergence(subtrees), lacking)
    assert not v.ok and "late lacks 1" in v.detail and v.clause == "eventbus.server.sync-response"


def client_sends(t: int, node: str, socket: str, frames: list[bytes]) -> Event:
    return Event(t, node, "client", SEND, socket, frames, C.decode(frames, channel=socket.split(".")[0]).name, codec=C)


def client_gets(t: int, node: str, socket: str, frames: list[bytes]) -> Event:
    return Event(t, node, "client", RECV, socket, frames, codec=C)  # a probe names no type on receipt


def test_an_external_server_is_judged_through_what_the_in_process_clients_exchange_with_it() -> None:
    from harness.checkers.eventbus_server import ForwardUnchanged, SnapshotFilter

    event = {"sequence": 1, "producer": "app", "timestamp": "2026-01-01T00:00:00.000Z", "uuid": UUIDS[1]}
    request = C.encode("SYNCSTART", {"subtrees": ["/w/"], "sequence": 0})
    foreign = C.encode("SYNC", {**event, "topic": "/n/y", "data": b"\x80"})
    end = C.encode("SYNCEND", {"subtrees": ["/w/"], "sequence": 1})
    snapshot = [client_sends(10, "app", "snapshot", request), client_gets(20, "app", "snapshot", foreign),
                client_gets(21, "app", "snapshot", end)]
    v = verdict(SnapshotFilter(external_servers={0: "bus"}), snapshot)
    assert not v.ok and v.clause == "eventbus.server.sync-subtree-filter" and "bus's snapshot" in v.detail, v
    # before: a server with no probe was not judged at all
    assert verdict(SnapshotFilter(), snapshot).ok

    pub = C.encode("PUB", {**event, "topic": "/w/x", "data": b"\x80"})
    altered = C.encode("BROADCAST", {**event, "topic": "/w/x", "data": b"\x81"})
    forwarded = [client_sends(10, "app", "collector", pub), client_gets(20, "other", "publisher", altered)]
    v = verdict(ForwardUnchanged(external_servers={0: "bus"}), forwarded)
    assert not v.ok and "bus sent BROADCAST 1" in v.detail and "data changed" in v.detail, v.detail
    same = [client_sends(10, "app", "collector", pub),
            client_gets(20, "other", "publisher", C.encode("BROADCAST", {**event, "topic": "/w/x", "data": b"\x80"}))]
    assert verdict(ForwardUnchanged(external_servers={0: "bus"}), same).ok


# checks proven here, by events as an external node's messages produce them (and live, slow:
# tests/test_external_roles_live.py); tests/checkers/test_eventbus_checkers.py counts them
PROVEN = {"external-wire"}


def test_a_malformed_message_from_an_external_client_is_caught_where_the_server_dropped_it() -> None:
    from harness.checkers.base import DISCARD
    from harness.checkers.eventbus_server import EventBusExternalWire

    two_frames = [b"SYNCSTART", b"/w/"]  # the SYNCSTART of the document's text: two frames
    got = Event(10, "bus", "server", RECV, "snapshot", [b"standin-7", *two_frames], codec=C)
    dropped = Event(10, "bus", "server", DISCARD, "snapshot", two_frames, codec=C,  # the message, no routing id
                    data={"reason": "SYNCSTART needs 3 frames", "clause": "eventbus.wire.syncstart-frames"})
    v = verdict(EventBusExternalWire(clients=["app"]), [got, dropped])
    assert not v.ok and v.clause == "eventbus.wire.syncstart-frames" and "standin-7" in v.detail, v
    # an in-process client's sends are wire-conformance's; rules that damage messages judge no one
    assert verdict(EventBusExternalWire(clients=["standin-7"]), [got, dropped]).ok
    assert "not judged" in verdict(EventBusExternalWire(clients=["app"], damaged=True), [got, dropped]).detail
    # a well-formed message dropped for another reason (a late answer) is no malformed one
    late = Event(20, "app", "client", DISCARD, "snapshot", C.encode("SYNCEND", {"subtrees": ["/w/"], "sequence": 1}),
                 codec=C, data={"reason": "unexpected SYNCEND: not synchronising", "clause": "eventbus.wire.grammar"})
    assert verdict(EventBusExternalWire(clients=["app"], external_servers={0: "bus"}), [late]).ok


def test_a_collector_drop_from_an_anonymous_connection_is_an_external_clients_only_if_there_is_one() -> None:
    from harness.checkers.base import DISCARD
    from harness.checkers.eventbus_server import EventBusExternalWire

    short_pub = [b"/w/x", b"\x00" * 8]  # a PUB of two frames
    rid = b"\x00\x80\x00\x00\x01"  # libzmq's generated id: the reference clients' collectors set none
    got = Event(10, "bus", "server", RECV, "collector", [rid, *short_pub], codec=C)
    dropped = Event(10, "bus", "server", DISCARD, "collector", short_pub, codec=C,
                    data={"reason": "PUB needs 6 frames", "clause": "eventbus.wire.grammar"})
    v = verdict(EventBusExternalWire(clients=["app"], external_clients=True), [got, dropped])
    assert not v.ok and repr(rid) in v.detail, v
    # with every client in-process, the anonymous connection was one of theirs: not an external node's
    assert verdict(EventBusExternalWire(clients=["app"], external_clients=False), [got, dropped]).ok


def test_an_external_servers_syncend_is_judged_against_its_syncs_at_the_client() -> None:
    from harness.checkers.eventbus import SyncEndSequence

    event = {"sequence": 1, "producer": "app", "timestamp": "2026-01-01T00:00:00.000Z", "uuid": UUIDS[1]}
    answer = [client_sends(10, "app", "snapshot", C.encode("SYNCSTART", {"subtrees": ["/w/"], "sequence": 0})),
              client_gets(20, "app", "snapshot", C.encode("SYNC", {**event, "topic": "/w/x", "data": b"\x80"}))]
    latest = verdict(SyncEndSequence(external_servers={0: "bus"}),
                     [*answer, client_gets(21, "app", "snapshot", C.encode("SYNCEND", {"subtrees": ["/w/"], "sequence": 5}))])
    # the strict SYNCEND carries the highest SYNC's sequence (E-EVENTBUS-08), not the latest
    assert not latest.ok and "SYNCEND 5, highest SYNC 1" in latest.detail, latest.detail
    right = verdict(SyncEndSequence(external_servers={0: "bus"}),
                    [*answer, client_gets(21, "app", "snapshot", C.encode("SYNCEND", {"subtrees": ["/w/"], "sequence": 1}))])
    assert right.ok and "not judged: bus (external: its SYNCENDs against its SYNCs only" in right.detail, right.detail


def test_answers_that_may_interleave_at_the_client_are_not_judged() -> None:
    from harness.checkers.eventbus import SyncEndSequence

    event = {"producer": "app", "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80", "topic": "/w/x"}
    ask = C.encode("SYNCSTART", {"subtrees": ["/w/"], "sequence": 0})
    # asked twice; the first answer's SYNC 2 came before the second SYNCSTART, its SYNC 1 after
    # (SYNCs in any order), then its SYNCEND 2: right, though 1 is all the client saw after the re-ask
    events = [client_sends(10, "app", "snapshot", ask),
              client_gets(11, "app", "snapshot", C.encode("SYNC", {**event, "sequence": 2, "uuid": UUIDS[2]})),
              client_sends(12, "app", "snapshot", ask),
              client_gets(13, "app", "snapshot", C.encode("SYNC", {**event, "sequence": 1, "uuid": UUIDS[1]})),
              client_gets(14, "app", "snapshot", C.encode("SYNCEND", {"subtrees": ["/w/"], "sequence": 2}))]
    assert verdict(SyncEndSequence(external_servers={0: "bus"}), events).ok


def test_a_scenario_that_corrupts_messages_in_flight_has_external_wire_judge_no_one() -> None:
    from harness.registry import package
    from harness.scenario import parse_scenario

    text = ("protocol: eventbus\nname: x\nduration: 1s\nnodes:\n  bus: {role: server}\n"
            '  out: {role: client, command: "c {server}"}\n')
    plain = package("eventbus").checks["external-wire"].factory(parse_scenario(text, "x.yaml"))
    damaged = package("eventbus").checks["external-wire"].factory(
        parse_scenario(text + "faults:\n  - rule: {message: PUB, corrupt: 5%}\n", "x.yaml"))
    assert (plain.damaged, damaged.damaged) == (False, True) and plain.any_external


def test_an_event_first_applied_after_the_bus_gave_its_status_is_not_blamed_on_the_bus() -> None:
    # A live run asks the reference bus for its holdings 300 ms before the end; an external
    # publisher may publish until the end. Before: an event broadcast after the status (applied
    # at 201) failed convergence "has 1 extra ... the bus holds", blaming eventbus.server.broadcast
    # on the correct reference bus (bench/chaos_standins.py, eb-crash-pubs, seed 1).
    base = [server_up(), synced(10, "app"), broadcast(20, 1), applied(21, "app", 1), status(100, [1])]
    late = verdict(Convergence({"app": ["/w/"]}), [*base, broadcast(200, 2), applied(201, "app", 2)])
    assert late.ok, late
    # an event a client had before the status and the bus does not hold still fails (a bus that
    # broadcasts what it does not keep), and so does another subtree's SYNC after the status
    kept_not = verdict(Convergence({"app": ["/w/"]}),
                       [server_up(), synced(10, "app"), applied(21, "app", 1), applied(31, "app", 2), status(100, [1])])
    assert not kept_not.ok and kept_not.clause == "eventbus.server.broadcast", kept_not
    foreign = verdict(Convergence({"app": ["/w/"]}), [*base, applied(201, "app", 3, "/n/y", "sync")])
    assert not foreign.ok and foreign.clause == "eventbus.server.sync-subtree-filter", foreign


def test_an_external_bus_whose_counter_starts_again_after_a_restart_is_caught_at_the_clients() -> None:
    # Before: server-sequence judged only a probed server's sends, so the stand-in bus run without
    # its --state file (numbers from 1 again after server-restart.yaml's restart, E-EVENTBUS-10)
    # passed every check of that file (bench/chaos_standins.py, seeds 1 and 2)
    from harness.checkers.eventbus import ServerSequence

    def got(t: int, node: str, i: int) -> Event:
        frames = C.encode("BROADCAST", {"topic": "/w/x", "sequence": i, "producer": "app", "uuid": UUIDS[i],
                                        "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
        return client_gets(t, node, "publisher", frames)

    restart = [Event(30, "bus", "server", CRASH), Event(40, "bus", "server", RESTART)]
    reset = [got(10, "a", 1), got(11, "b", 1), got(20, "a", 3), *restart, got(50, "a", 1), got(51, "b", 2)]
    v = verdict(ServerSequence(external=["bus"], from_clients=True), reset)
    assert not v.ok and "bus sent a 1 after 3" in v.detail and v.clause == "eventbus.server.sequence-increasing", v
    kept = [got(10, "a", 1), got(11, "b", 1), got(20, "a", 3), *restart, got(50, "a", 4), got(51, "b", 4)]
    v = verdict(ServerSequence(external=["bus"], from_clients=True), kept)
    assert v.ok and "bus (external) judged as the in-process clients received its BROADCASTs" in v.detail, v
    # rules that may reorder or duplicate messages (from_clients False): not judged, and said so
    v = verdict(ServerSequence(external=["bus"]), reset)
    assert v.ok and "not judged" in v.detail, v


def test_server_sequence_reads_an_external_bus_from_the_clients_only_where_the_wire_keeps_its_order() -> None:
    from pathlib import Path

    import yaml

    from harness.packages.eventbus import CHECKS
    from harness.scenario import parse_scenario

    def checker(file: str, drop_rules: bool = False) -> Any:
        doc = yaml.safe_load(Path(f"scenarios/eventbus/chaos/{file}.yaml").read_text())
        doc["nodes"]["bus"]["command"] = "my-bus --port {port}"
        if drop_rules:
            doc["faults"] = [f for f in doc.get("faults", []) if "rule" not in f]
        return CHECKS["server-sequence"].factory(parse_scenario(yaml.safe_dump(doc), file))

    assert checker("server-restart").from_clients  # a crash and restart, no message rules
    assert not checker("lossy").from_clients  # BROADCASTs reordered and duplicated on the way
    assert checker("lossy", drop_rules=True).from_clients


def ask(t: int, since: int) -> Event:
    """app asks its (external) server for a snapshot of /w/ above ``since``."""
    return client_sends(t, "app", "snapshot", C.encode("SYNCSTART", {"subtrees": ["/w/"], "sequence": since}))


def sync(t: int, seq: int, topic: str = "/w/x") -> Event:
    return client_gets(t, "app", "snapshot", C.encode("SYNC", {
        "topic": topic, "sequence": seq, "producer": "app", "timestamp": "2026-01-01T00:00:00.000Z",
        "uuid": UUIDS[seq % 10], "data": b"\x80"}))


def end(t: int, seq: int) -> Event:
    return client_gets(t, "app", "snapshot", C.encode("SYNCEND", {"subtrees": ["/w/"], "sequence": seq}))


def test_answers_to_a_request_asked_again_may_interleave_at_the_client() -> None:
    # The reference client asks again when no SYNCEND comes in time, and resynchronises
    # periodically: the SYNCs of the older request may arrive after the newer request went out.
    # Before, each SYNC was judged against the newest request only: snapshot-filter failed
    # "bus's snapshot for ['/a/', '/b/'] above 184: SYNC 117, not above the requested sequence" against a
    # snapshot of the reference bus run as the process (with --mutant broadcast-twice, whose snapshots
    # are the reference's: server-restart.yaml, seed 1)
    from harness.checkers.eventbus_server import SnapshotFilter

    interleaved = [ask(10, 100), ask(20, 184), sync(30, 117), end(31, 117), sync(40, 190), end(41, 190)]
    v = verdict(SnapshotFilter(external_servers={0: "bus"}), interleaved)
    assert v.ok and "2 snapshot(s), 2 SYNC(s)" in v.detail, v
    # a SYNC above neither open request, or outside their subtrees, still fails
    low = verdict(SnapshotFilter(external_servers={0: "bus"}), [ask(10, 100), ask(20, 184), sync(30, 90)])
    assert not low.ok and low.clause == "eventbus.server.sync-sequence-filter" and "SYNC 90" in low.detail, low
    foreign = verdict(SnapshotFilter(external_servers={0: "bus"}), [ask(10, 100), ask(20, 184), sync(30, 150, "/n/y")])
    assert not foreign.ok and foreign.clause == "eventbus.server.sync-subtree-filter", foreign
    # once one request is answered, a SYNC is judged against the other alone; which one a SYNCEND
    # answered is not known (see the next test), so the one asking for more stays open
    closed = verdict(SnapshotFilter(external_servers={0: "bus"}),
                     [ask(10, 100), ask(20, 184), end(25, 100), sync(30, 150), sync(35, 90)])
    assert not closed.ok and "above 100: SYNC 90" in closed.detail and "SYNC 150" not in closed.detail, closed


def test_an_external_bus_may_answer_a_catch_up_before_an_older_request() -> None:
    # The deployed bus answers each SYNCSTART from its own asynchronous query: a catch-up from 184
    # (quick) may be answered before the client's repeated request from 100 (slow). Before, the
    # first SYNCEND closed the oldest request and the older answer's SYNCs were judged against 184:
    # "snapshot for ['/w/'] above 184: SYNC 150, not above the requested sequence"
    from harness.checkers.eventbus_server import SnapshotFilter

    out_of_order = [ask(10, 100), ask(20, 184), sync(30, 190), end(31, 190), sync(40, 150), sync(41, 190),
                    end(42, 190)]
    v = verdict(SnapshotFilter(external_servers={0: "bus"}), out_of_order)
    assert v.ok and "2 snapshot(s), 3 SYNC(s)" in v.detail, v
    # our own server (its probe) answers in the order asked: the oldest request is closed first
    probed = [Event(e.time_ns, "bus", "server", RECV if e.kind == SEND else SEND, "snapshot", [b"app", *e.frames],
                    codec=C) for e in [ask(10, 100), ask(20, 184), end(25, 100), sync(30, 150)]]
    v = verdict(SnapshotFilter(), probed)
    assert not v.ok and "above 184: SYNC 150" in v.detail, v


def test_a_request_sent_before_the_external_bus_crashed_may_be_answered_after_its_restart() -> None:
    # Seen from the client, a SYNCSTART sent before the crash is queued by its DEALER and reaches
    # the restarted bus; before, the crash closed the client's open requests and the answer was
    # judged against the next request: snapshot-filter failed the reference bus run as the process
    # "snapshot for ['/a/', '/b/'] above 85: SYNC 72, not above the requested sequence"
    # (server-restart.yaml, bench/chaos_standins.py eb-restart-bus, reference, seed 1)
    from harness.checkers.eventbus_server import SnapshotFilter

    crash = [Event(15, "bus", "server", CRASH), Event(20, "bus", "server", RESTART)]
    events = [ask(10, 60), *crash, ask(30, 85), sync(40, 72), end(41, 72), sync(50, 90), end(51, 90)]
    v = verdict(SnapshotFilter(external_servers={0: "bus"}), events)
    assert v.ok, v
    # once one is answered, a SYNC below the one left open (the one asking for more) fails
    late = [ask(10, 60), *crash, ask(30, 85), end(41, 60), sync(50, 50)]
    v = verdict(SnapshotFilter(external_servers={0: "bus"}), late)
    assert not v.ok and "above 60: SYNC 50" in v.detail, v


# ---- complete-delivery with every server external: what the clients published is owed too ----

MS = 1_000_000
END = 10_000 * MS


def published(t_ms: int, i: int, node: str = "app") -> Event:
    frames = C.encode("PUB", {"topic": "/w/x", "sequence": 0, "producer": node, "uuid": UUIDS[i],
                              "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
    return client_sends(t_ms * MS, node, "collector.0", frames)


def came_back(t_ms: int, i: int, node: str = "app") -> Event:
    frames = C.encode("BROADCAST", {"topic": "/w/x", "sequence": i, "producer": "app", "uuid": UUIDS[i],
                                    "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
    return client_gets(t_ms * MS, node, "publisher.0", frames)


def delivery(events: list[Event], pub_loss: str = "", external_servers: bool = True) -> Verdict:
    check = CompleteDelivery({"app": ["/w/"]}, servers=["bus"], external_servers=external_servers, pub_loss=pub_loss)
    for ev in [synced(0, "app"), *events]:
        check.on_event(ev)
    [v] = check.finish(END)
    return v


def test_an_external_server_that_swallows_what_a_client_published_twice_fails() -> None:
    # before: with the server external nothing counted as accepted, so a server that broadcast
    # nothing passed (the mutant swapped-ports as the external server of server-restart.yaml)
    lost = [published(100, 1), published(700, 1)]
    v = delivery(lost)
    assert not v.ok and v.clause == "eventbus.server.broadcast", v.detail
    assert f"1 published event(s) no client got from the servers (external), e.g. {UUIDS[1]}" in v.detail
    assert "whose PUB app sent 2 time(s) from 100.0 ms" in v.detail
    # what came back by BROADCAST (or SYNC) is not owed again
    v = delivery([*lost, came_back(710, 1)])
    assert v.ok and "of 1 event(s) the clients published to the servers (external), 1 came back" in v.detail, v.detail
    # with reference servers, their probe shows what they took: this rule does not apply
    assert delivery(lost, external_servers=False).ok


def test_a_pub_that_may_have_been_lost_is_not_owed() -> None:
    assert delivery([published(100, 1)]).ok, "once: its one PUB may be lost"
    assert delivery([published(8_500, 1), published(9_000, 1)]).ok, "near the end: it may still be on its way"
    down = [published(100, 1), Event(600 * MS, "bus", "server", CRASH), published(700, 1),
            Event(900 * MS, "bus", "server", RESTART)]
    assert delivery(down).ok, "around the server's crash and restart"
    paused = [Event(50 * MS, "bus", "server", PAUSE), published(100, 1), published(700, 1),
              Event(800 * MS, "bus", "server", RESUME)]
    assert delivery(paused).ok, "while the server was stopped"
    assert not delivery([*down, published(3_000, 1), published(4_000, 1)]).ok, "twice well after the restart"
    # a crash while paused is one window, from the pause to the restart (it stays open no longer)
    paused_then_killed = [Event(50 * MS, "bus", "server", PAUSE), Event(200 * MS, "bus", "server", CRASH),
                          Event(900 * MS, "bus", "server", RESTART)]
    assert delivery([*paused_then_killed, published(400, 1), published(1_500, 1)]).ok, "within 1 s of the restart"
    assert not delivery([*paused_then_killed, published(2_000, 1), published(2_600, 1)]).ok, "well after it"
    assert delivery([published(100, 1), Event(600 * MS, "bus", "server", RESTART), published(700, 1)]).ok, \
        "a restart the run saw without its crash: a moment's disruption"
    v = delivery([published(100, 1), published(700, 1)], pub_loss="the rules may drop or damage PUBs: rule-3")
    assert v.ok and v.detail.endswith("not judged: whether the servers (external) broadcast what the clients "
                                      "published (the rules may drop or damage PUBs: rule-3)"), v.detail


def test_the_package_says_when_the_faults_may_lose_a_pub() -> None:
    from harness.packages.eventbus import pub_loss
    from harness.scenario import load_scenario

    chaos = "scenarios/eventbus/chaos"
    assert pub_loss(load_scenario(f"{chaos}/lossy.yaml")) == "the rules may drop or damage PUBs: rule-3"
    assert pub_loss(load_scenario(f"{chaos}/partition-heal.yaml")) == "a partition may cut clients off"
    assert pub_loss(load_scenario(f"{chaos}/server-restart.yaml")) == ""
