"""Clause catalogue of the Event BUS Protocol (`specs/eventbus.md`, micro-toolkit).

One clause per normative requirement of the document. Keyword mapping: SHALL and REQUIRED
are MUST, SHALL NOT is MUST NOT, RECOMMENDED is SHOULD, OPTIONAL and NOT REQUIRED are MAY.
Besides the keyword sentences, the catalogue holds clauses synthesized from descriptive text
that the codec and the checkers must be able to name, all at level MUST:

* the frame formats: `eventbus.wire.grammar` (catch-all), `eventbus.wire.syncstart-frames`,
  the field encodings (`eventbus.wire.sequence-format`, `-uuid-v4`, `-timestamp-iso8601`,
  `-data-msgpack`, `-subtree-format`);
* the snapshot filters that the text states with "will" (`eventbus.server.sync-sequence-filter`,
  `eventbus.server.sync-subtree-filter`) and the SYNCEND subtree frame;
* what the server does with a producer's event (`eventbus.server.own-sequence`,
  `eventbus.server.forward-unchanged`).

Each synthesized clause names the erratum (E-EVENTBUS-NN in `docs/errata.md`, fragment
`docs/errata.md`) that explains the reading. The quoted ØMQ Reference Manual text
("shall prepend ...") describes ZeroMQ, not this protocol, and is not catalogued (E-EVENTBUS-07).

Roles: "server" (the bus) and "client" (subscriber and/or publisher). Ids are permanent:
never rename or reuse one.
"""

from __future__ import annotations

from harness.protocols.clauses import Catalogue, Clause, Level, Observable

_SERVER = ("server",)
_CLIENT = ("client",)

_PORTS = "Ports and Connections"
_SYNC = "State Synchronization"
_S2C = "Server-to-Client Updates"
_C2S = "Client-to-Server Updates"
_RELIABILITY = "Reliability"

CLAUSES: tuple[Clause, ...] = (
    # --- Ports and Connections ----------------------------------------------------------
    Clause(
        id="eventbus.server.ports",
        level=Level.MUST,
        section=_PORTS,
        text=(
            "The server MUST open three ports as follows: A SNAPSHOT port (0MQ ROUTER socket) at"
            " port"
            " number P. A PUBLISHER port (0MQ PUB socket) at port number P + 1. A COLLECTOR port"
            " (0MQ ROUTER socket) at port number P + 2."
        ),
        observable=Observable.WIRE,  # endpoints and ZMTP socket types
        roles=_SERVER,
        errata="E-EVENTBUS-16",
    ),
    Clause(
        id="eventbus.client.connections",
        level=Level.SHOULD,
        section=_PORTS,
        text=(
            "The client SHOULD open at least two connections: A SNAPSHOT connection (0MQ DEALER"
            " socket) to port number P. A SUBSCRIBER connection (0MQ SUB socket) to port number P"
            " + 1."
        ),
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-15",
    ),
    Clause(
        id="eventbus.client.publisher-connection",
        level=Level.MAY,
        section=_PORTS,
        text=(
            "The client MAY open a third connection, if it wants to produce events: A PUBLISHER"
            " connection (0MQ DEALER socket) to port number P + 2."
        ),
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-16",
    ),
    # --- State Synchronization ----------------------------------------------------------
    Clause(
        id="eventbus.client.syncstart-first",
        level=Level.MUST,
        section=_SYNC,
        text="The client MUST start by sending a SYNCSTART command to its snapshot connection.",
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-15",
    ),
    Clause(
        id="eventbus.wire.syncstart-frames",
        level=Level.MUST,  # synthesized: three frames, not two
        section=_SYNC,
        text="This command consists of two frames as follows:",
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-01",
    ),
    Clause(
        id="eventbus.wire.subtree-empty",
        level=Level.MAY,
        section=_SYNC,
        text="The subtree specification MAY be empty.",
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-05",
    ),
    Clause(
        id="eventbus.wire.subtree-format",
        level=Level.MUST,  # descriptive ("it consists of"), binding as a frame format
        section=_SYNC,
        text=(
            "If not empty, it consists of a slash followed by one or more path segments, ending in"
            " a"
            " slash. Eg: '/topic/'."
        ),
        observable=Observable.WIRE,
        errata="E-EVENTBUS-05",
    ),
    Clause(
        id="eventbus.wire.subtree-list",
        level=Level.MAY,
        section=_SYNC,
        text=(
            "The client MAY request sync for several subtrees using ';' so separated them. Eg:"
            " '/topic/;/othertopic/'."
        ),
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-05",
    ),
    Clause(
        id="eventbus.wire.sequence-filter-zero",
        level=Level.MAY,
        section=_SYNC,
        text="The sequence specification MAY be 0.",
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-02",
    ),
    Clause(
        id="eventbus.server.sync-sequence-filter",
        level=Level.MUST,  # "will": descriptive, read as binding
        section=_SYNC,
        text=(
            "If not empty it will consist in natural number that will be used to filter events"
            " present in the snapshot. It will return all events with sequence number above."
        ),
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-02",
    ),
    Clause(
        id="eventbus.server.sync-subtree-filter",
        level=Level.MUST,  # synthesized: a sync covers the requested subtrees only
        section=_SYNC,
        text="The client MAY request sync for several subtrees",
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-05",
    ),
    Clause(
        id="eventbus.server.sync-response",
        level=Level.MUST,
        section=_SYNC,
        text=(
            "The server MUST respond to a SYNCSTART command by sending zero or more SYNC commands"
            " to"
            " its snapshot port, followed with a SYNCEND command."
        ),
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-09",
    ),
    Clause(
        id="eventbus.server.identity-prefix",
        level=Level.MUST,
        section=_SYNC,
        text=(
            "The server MUST prefix each command with the identity of the client, as provided by"
            " 0MQ"
            " with the SYNCSTART command."
        ),
        observable=Observable.WIRE,  # seen as which DEALER the SYNC/SYNCEND commands reach
        roles=_SERVER,
    ),
    Clause(
        id="eventbus.server.syncend-sequence",
        level=Level.MUST,
        section=_SYNC,
        text=(
            "The sequence number MUST be the highest sequence number of the SYNC commands"
            " previously sent."
        ),
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-08",
    ),
    Clause(
        id="eventbus.server.syncend-subtree",
        level=Level.MUST,  # synthesized: frame 1 echoes the request's subtree specification
        section=_SYNC,
        text='SYNCEND command [...] Frame 0: "SYNCEND" Frame 1: subtree/s specification',
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-06",
    ),
    Clause(
        id="eventbus.client.apply-after-syncend",
        level=Level.SHOULD,
        section=_SYNC,
        text=(
            "When the client has received a SYNCEND command it SHOULD start to receive messages"
            " from"
            " its subscriber connection, and apply them."
        ),
        observable=Observable.INTERNAL,  # application delivery
        roles=_CLIENT,
        errata="E-EVENTBUS-11",
    ),
    # --- Server-to-Client Updates -------------------------------------------------------
    Clause(
        id="eventbus.server.broadcast",
        level=Level.MUST,
        section=_S2C,
        text=(
            "When the server has an event it MUST broadcast this on its publisher socket as a"
            " BROADCAST command."
        ),
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-12",
    ),
    Clause(
        id="eventbus.server.sequence-increasing",
        level=Level.MUST,
        section=_S2C,
        text="The sequence number MUST be strictly incremental.",
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-10",
    ),
    Clause(
        id="eventbus.client.discard-old",
        level=Level.MUST,
        section=_S2C,
        text=(
            "The client MUST discard any BROADCAST commands whose sequence numbers are not strictly"
            " greater than the last SYNCEND or BROADCAST command received."
        ),
        observable=Observable.INTERNAL,  # seen only in what the client applies
        roles=_CLIENT,
        errata="E-EVENTBUS-08",
    ),
    # --- Client-to-Server Updates -------------------------------------------------------
    Clause(
        id="eventbus.client.publish",
        level=Level.MAY,
        section=_C2S,
        text=(
            "When the client has a new event, it MAY send this to the server via its publisher"
            " connection as a PUB command."
        ),
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-EVENTBUS-16",
    ),
    Clause(
        id="eventbus.server.own-sequence",
        level=Level.MUST,  # synthesized: the server numbers events, not the producer
        section=_C2S,
        text=(
            "Frame 1: sequence number, 8 bytes in network order [...] **** NOTES TO add related to"
            " sequence number"
        ),
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-03",
    ),
    Clause(
        id="eventbus.client.uuid-unique",
        level=Level.SHOULD,
        section=_C2S,
        text=(
            "The UUID SHOULD be a universally unique identifier, if a reliable server architecture"
            " is used."
        ),
        observable=Observable.WIRE,  # a UUID reused for a different event
        roles=_CLIENT,
        errata="E-EVENTBUS-13",
    ),
    Clause(
        id="eventbus.client.producer-id",
        level=Level.SHOULD,
        section=_C2S,
        text="The producer unique id, SHOULD identify the event producer.",
        observable=Observable.WIRE,  # one producer id per producer across its PUB commands
        roles=_CLIENT,
    ),
    Clause(
        id="eventbus.server.forward-unchanged",
        level=Level.MUST,  # synthesized: SYNC and BROADCAST carry the producer's fields
        section=_C2S,
        text=(
            "Frame 2: event producer unique id, as 0MQ string Frame 3: event producer timestamp, as"
            " 0MQ string in ISO-8601 format"
        ),
        observable=Observable.WIRE,
        roles=_SERVER,
        errata="E-EVENTBUS-12",
    ),
    # --- Frame encodings (synthesized from the command tables) --------------------------
    Clause(
        id="eventbus.wire.sequence-format",
        level=Level.MUST,
        section=_SYNC,
        text="sequence number, 8 bytes in network order",
        observable=Observable.WIRE,
        errata="E-EVENTBUS-14",
    ),
    Clause(
        id="eventbus.wire.uuid-v4",
        level=Level.MUST,
        section=_SYNC,
        text="event UUID, as 0MQ string formatted in v4 as specified at rfc4122",
        observable=Observable.WIRE,
        errata="E-EVENTBUS-14",
    ),
    Clause(
        id="eventbus.wire.timestamp-iso8601",
        level=Level.MUST,
        section=_SYNC,
        text="event producer timestamp, as 0MQ string in ISO-8601 format",
        observable=Observable.WIRE,
        errata="E-EVENTBUS-14",
    ),
    Clause(
        id="eventbus.wire.data-msgpack",
        level=Level.MUST,
        section=_SYNC,
        text="event data, as blob generated by Message Pack serialization",
        observable=Observable.WIRE,
        errata="E-EVENTBUS-14",
    ),
    Clause(
        id="eventbus.wire.grammar",
        level=Level.MUST,  # catch-all: every command has exactly the frames of its table
        section=_SYNC,
        text=(
            "SYNCSTART command [...] SYNC command [...] SYNCEND command [...] BROADCAST command"
            " [...]"
            " PUB command"
        ),
        observable=Observable.WIRE,
        errata="E-EVENTBUS-14",
    ),
    # --- Reliability --------------------------------------------------------------------
    Clause(
        id="eventbus.client.detect-server-failure",
        level=Level.MAY,
        section=_RELIABILITY,
        text=(
            "To assist server reliability, the client MAY: Detect the lack of server heartbeats"
            " over"
            " time time period and use this as an indicator that the current server has failed."
        ),
        observable=Observable.INTERNAL,  # no heartbeat exists to observe (E-EVENTBUS-04)
        roles=_CLIENT,
        errata="E-EVENTBUS-04",
    ),
    Clause(
        id="eventbus.client.failover-resync",
        level=Level.MAY,
        section=_RELIABILITY,
        text=(
            "To assist server reliability, the client MAY: [...] Connect to a backup server and"
            " re-request a state synchronization."
        ),
        observable=Observable.WIRE,
        roles=_CLIENT,
    ),
)

CATALOGUE = Catalogue("eventbus", "eventbus.md", CLAUSES)
