"""Clause catalogue of the DagBox Communication Protocol v1 (`specs/dcp-v1.md`).

One clause per normative requirement of the document. Keyword mapping: SHALL and REQUIRED
are MUST, SHALL NOT is MUST NOT, RECOMMENDED is SHOULD, OPTIONAL and NOT REQUIRED are MAY.
Besides the keyword sentences, the catalogue holds clauses read from descriptive text that
the codec and the checkers must be able to name, all at level MUST:

* the message formats: `dcp.wire.header`, `dcp.wire.version`, `dcp.wire.message-type`,
  `dcp.wire.grammar` (catch-all) and `dcp.reply.format`;
* the broker's pass-through duties that the text implies but never states:
  `dcp.broker.route-reply` and `dcp.broker.data-unmodified`;
* `dcp.broker.register-confirm`, stated with "will" (E-DCP-07).

The `errata` field names the entry of `docs/errata.md` (E-DCP-NN, fragment
`docs/errata.md`) that changes or settles a clause. Where the document states one
requirement twice, the catalogue holds it once (E-DCP-16).

`observable`: WIRE when a violation shows in messages that are sent (bytes, fields, order,
which peer they reach); TIMING when it shows only in a message not sent in time; INTERNAL
when only the node itself can show it.

Ids are permanent: never rename or reuse one. Roles: "broker", "worker", "client". A
worker is a client that has registered a service, so a clause for "client" also binds a
worker acting as a client, except for heartbeats (E-DCP-02).
"""

from __future__ import annotations

from harness.protocols.clauses import Catalogue, Clause, Level, Observable

_BROKER = ("broker",)
_WORKER = ("worker",)
_CLIENT = ("client",)
_PEERS = ("worker", "client")  # the components that connect to the broker

_ARCH = "Architecture"
_FORMAT = "Message Format"
_CONN = "Connection"
_REQ = "Requests & Replies"
_HB = "Heartbeats"

CLAUSES: tuple[Clause, ...] = (
    # --- Architecture -------------------------------------------------------------------
    Clause(
        id="dcp.architecture.clients-workers-any-number",
        level=Level.MAY,
        section=_ARCH,
        text="There MAY be any number of clients and workers",
        observable=Observable.WIRE,
    ),
    Clause(
        id="dcp.broker.single",
        level=Level.MUST,
        section=_ARCH,
        text="there MUST be 1 and only 1 broker.",
        observable=Observable.INTERNAL,  # a deployment property: no message shows it
        roles=_BROKER,
    ),
    Clause(
        id="dcp.connection.zeromq",
        level=Level.MUST,
        section=_ARCH,
        text="Components SHALL communicate using ØMQ.",
        observable=Observable.WIRE,
    ),
    Clause(
        id="dcp.client.may-register",
        level=Level.MAY,
        section=_ARCH,
        text="A client MAY register itself as a service to become a worker.",
        observable=Observable.WIRE,
        roles=_CLIENT,
    ),
    Clause(
        id="dcp.broker.service-queue",
        level=Level.SHOULD,
        section=_ARCH,
        text=(
            "Requests SHOULD be queued, and served to workers as they become available to accept"
            " work."
        ),
        observable=Observable.TIMING,  # a dropped or withheld request is a message not sent
        roles=_BROKER,
        errata="E-DCP-06",
    ),
    Clause(
        id="dcp.architecture.persistence-not-required",
        level=Level.MAY,
        section=_ARCH,
        text="The broker and workers are NOT REQUIRED to persistantly hold requests.",
        observable=Observable.INTERNAL,
        roles=("broker", "worker"),
    ),
    Clause(
        id="dcp.client.retry",
        level=Level.SHOULD,
        section=_ARCH,
        text=(
            "Clients SHOULD keep track of when they have sent the request and retry if it exceeds"
            " a client-defined timeout."
        ),
        observable=Observable.TIMING,
        roles=_CLIENT,
        errata="E-DCP-16",
    ),
    # --- Message Format -----------------------------------------------------------------
    Clause(
        id="dcp.wire.header",
        level=Level.MUST,
        section=_FORMAT,
        text=(
            "All DCP messages start with the DCP header. The header is composed of 4 message parts:"
            " Sender address [...] Address delimiter: This is an empty part [...] Protocol: This"
            " part"
            " contains 5 bytes, the characters `DGBX` followed by an unsigned 8-bit number [...]"
            " Message Type: This part contains only 1 byte"
        ),
        observable=Observable.WIRE,
        errata="E-DCP-01",
    ),
    Clause(
        id="dcp.wire.version",
        level=Level.MUST,
        section=_FORMAT,
        text=(
            "the characters `DGBX` followed by an unsigned 8-bit number describing the supported"
            " version of DCP."
        ),
        observable=Observable.WIRE,
        errata="E-DCP-10",
    ),
    Clause(
        id="dcp.wire.message-type",
        level=Level.MUST,
        section=_FORMAT,
        text=(
            "Message Type: This part contains only 1 byte, an unsigned 8-bit number describing the"
            " type of the message."
        ),
        observable=Observable.WIRE,
        errata="E-DCP-03",  # settles the sixth value, 0x06 (reconnect)
    ),
    Clause(
        id="dcp.broker.recipient-address",
        level=Level.MUST,
        section=_FORMAT,
        text=(
            "The broker MUST insert the address of the component that the message is being sent to"
            " in this part."
        ),
        observable=Observable.WIRE,  # seen as which peer the message reaches
        roles=_BROKER,
        errata="E-DCP-01",
    ),
    Clause(
        id="dcp.wire.grammar",
        level=Level.MUST,
        section=_FORMAT,
        text="DCP uses the ØMQ's multiple message part functionality to format messages.",
        observable=Observable.WIRE,
        errata="E-DCP-15",  # what a receiver does with a message that breaks the grammar
    ),
    # --- Connection ---------------------------------------------------------------------
    Clause(
        id="dcp.broker.router-socket",
        level=Level.MUST,
        section=_CONN,
        text=(
            "The broker MUST always accept connections on a router type (`ZMQ_ROUTER`) ØMQ socket."
        ),
        observable=Observable.WIRE,  # the socket type travels in the ZMTP handshake
        roles=_BROKER,
    ),
    Clause(
        id="dcp.broker.multiple-sockets",
        level=Level.MAY,
        section=_CONN,
        text="It MAY open 1 or more sockets.",
        observable=Observable.WIRE,
        roles=_BROKER,
    ),
    Clause(
        id="dcp.broker.any-transport",
        level=Level.MAY,
        section=_CONN,
        text="It MAY use any transport that is supported by ØMQ.",
        observable=Observable.WIRE,
        roles=_BROKER,
    ),
    Clause(
        id="dcp.connection.dealer-socket",
        level=Level.MUST,
        section=_CONN,
        text=(
            "Other components MUST connect to the broker using a dealer type (`ZMQ_DEALER`) socket."
        ),
        observable=Observable.WIRE,
        roles=_PEERS,
    ),
    Clause(
        id="dcp.worker.register",
        level=Level.MUST,
        section=_CONN,
        text="Workers MUST send a registration message to register the service they provide.",
        observable=Observable.WIRE,
        roles=_WORKER,
        errata="E-DCP-12",
    ),
    Clause(
        id="dcp.worker.service-name-any",
        level=Level.MAY,
        section=_CONN,
        text="Service name, a string of any number of bytes. MAY contain any character.",
        observable=Observable.WIRE,  # a broker that rejects or alters such a name shows it
        roles=_WORKER,
        errata="E-DCP-11",
    ),
    Clause(
        id="dcp.broker.register-confirm",
        level=Level.MUST,  # "will": descriptive, read as binding; see E-DCP-07
        section=_CONN,
        text=(
            "If the registration is successful, the broker will confirm it by responding with the"
            " same message."
        ),
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-07",
    ),
    # --- Requests & Replies -------------------------------------------------------------
    Clause(
        id="dcp.request.clients-and-workers",
        level=Level.MAY,
        section=_REQ,
        text="Both clients and workers MAY send requests.",
        observable=Observable.WIRE,
        roles=_PEERS,
    ),
    Clause(
        id="dcp.request.format",
        level=Level.MUST,
        section=_REQ,
        text=(
            "Requests MUST have the following format: [...] DCP Header, with message type `0x04`."
            " Service name [...] Client address [...] Client address delimiter [...] Metadata"
            " parts [...]"
            " Metadata delimiter [...] Data parts."
        ),
        observable=Observable.WIRE,
        errata="E-DCP-05",
    ),
    Clause(
        id="dcp.request.service-name-any",
        level=Level.MAY,
        section=_REQ,
        text="Service name, a string of any number of bytes. MAY contain any character.",
        observable=Observable.WIRE,
        roles=_PEERS,
        errata="E-DCP-11",
    ),
    Clause(
        id="dcp.broker.route-by-service",
        level=Level.MUST,
        section=_REQ,
        text="The request SHALL be routed to a worker that provides this service.",
        # restated as "The broker SHALL serve requests to the workers providing the matching
        # service." later in the same section; one requirement (E-DCP-16).
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-16",
    ),
    Clause(
        id="dcp.request.client-address-optional",
        level=Level.MAY,  # lowercase "optional"; catalogued because the grammar depends on it
        section=_REQ,
        text="Client address. This part is optional for clients.",
        observable=Observable.WIRE,
        roles=_PEERS,
        errata="E-DCP-05",
    ),
    Clause(
        id="dcp.broker.insert-client-address",
        level=Level.MUST,
        section=_REQ,
        text=(
            "The broker MUST insert the address of the client that sent the request here, if [...]"
            " this part was missing."
        ),
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-05",
    ),
    Clause(
        id="dcp.broker.keep-client-address",
        level=Level.MUST_NOT,  # the "only if" half: a present address is not replaced
        section=_REQ,
        text=(
            "The broker MUST insert the address of the client that sent the request here, if and"
            " only if this part was missing."
        ),
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-05",
    ),
    Clause(
        id="dcp.request.metadata-parts",
        level=Level.MAY,
        section=_REQ,
        text="Metadata parts. Any number of non-empty parts MAY be inserted here by the client.",
        observable=Observable.WIRE,
        roles=_PEERS,
    ),
    Clause(
        id="dcp.broker.metadata-unmodified",
        level=Level.MUST_NOT,
        section=_REQ,
        text="The broker MUST NOT modify these parts when routing the message",
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-04",  # extends to the reply hop
    ),
    Clause(
        id="dcp.worker.metadata-copied",
        level=Level.MUST,
        section=_REQ,
        text="workers MUST copy these parts into the reply without any modifications.",
        observable=Observable.WIRE,
        roles=_WORKER,
    ),
    Clause(
        id="dcp.broker.data-unmodified",
        level=Level.MUST,  # synthesized: only the client address may change in transit
        section=_REQ,
        text=(
            "Data parts. Any number of parts may be inserted here by the client. The format of the"
            " parts depend on the service the message is being sent to."
        ),
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-14",
    ),
    Clause(
        id="dcp.reply.format",
        level=Level.MUST,  # synthesized from the description of the reply
        section=_REQ,
        text=(
            "Reply messages have a very similar format. There are only two differences for the"
            " reply"
            " messages: The message type is `0x05`. The service name is not included."
        ),
        observable=Observable.WIRE,
        roles=("worker", "broker"),
        errata="E-DCP-04",
    ),
    Clause(
        id="dcp.broker.route-reply",
        level=Level.MUST,  # synthesized: the document never describes the reply hop
        section=_FORMAT,
        text=(
            "This part is automatically inserted by ØMQ for clients and workers when the message is"
            " first sent, and stripped when a reply is recieved."
        ),
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-04",
    ),
    Clause(
        id="dcp.client.pipelining",
        level=Level.MAY,
        section=_REQ,
        text="Clients MAY send multiple requests without waiting for a reply.",
        observable=Observable.WIRE,
        roles=_CLIENT,
    ),
    Clause(
        id="dcp.client.track-by-metadata",
        level=Level.SHOULD,
        section=_REQ,
        text=(
            "the client SHOULD use the metadata parts to track which reply corresponds to which"
            " request."
        ),
        observable=Observable.INTERNAL,  # the matching happens inside the client
        roles=_CLIENT,
    ),
    Clause(
        id="dcp.client.keep-copies",
        level=Level.SHOULD,
        section=_REQ,
        text=(
            "Clients SHOULD keep copies of the requests they have sent and retry them if they don't"
            " get a reply in a reasonable amount of time."
        ),
        # the retry half is dcp.client.retry; this clause is the internal bookkeeping
        observable=Observable.INTERNAL,
        roles=_CLIENT,
        errata="E-DCP-16",
    ),
    Clause(
        id="dcp.broker.one-request-per-worker",
        level=Level.SHOULD_NOT,
        section=_REQ,
        text=(
            "Once a worker has been given a request, the broker SHOULD NOT give more requests to"
            " that worker until the it has responded to the broker."
        ),
        observable=Observable.WIRE,  # order of request and response on one worker connection
        roles=_BROKER,
        errata="E-DCP-06",
    ),
    # --- Heartbeats ---------------------------------------------------------------------
    Clause(
        id="dcp.heartbeat.client-no-heartbeat",
        level=Level.MUST_NOT,
        section=_HB,
        text="Clients MUST NOT send heartbeat messages to the broker.",
        observable=Observable.WIRE,
        roles=_CLIENT,
        errata="E-DCP-02",
    ),
    Clause(
        id="dcp.heartbeat.worker-interval",
        level=Level.MUST,
        section=_HB,
        text=(
            "Workers MUST periodically send heartbeat messages to the broker at an"
            " implementation-defined interval, agreed upon with the broker."
        ),
        observable=Observable.TIMING,
        roles=_WORKER,
        errata="E-DCP-09",
    ),
    Clause(
        id="dcp.heartbeat.skip-after-traffic",
        level=Level.MAY,
        section=_HB,
        text=(
            "If the worker has sent any other message to the broker in this interval, it MAY skip a"
            " heartbeat message."
        ),
        observable=Observable.TIMING,
        roles=_WORKER,
        errata="E-DCP-06",
    ),
    Clause(
        id="dcp.heartbeat.worker-ping",
        level=Level.MUST,
        section=_HB,
        text="Clients as workers MUST sent ping messages.",
        observable=Observable.WIRE,
        roles=_WORKER,
        errata="E-DCP-02",
    ),
    Clause(
        id="dcp.heartbeat.pong",
        level=Level.MUST,
        section=_HB,
        text="The broker MUST respond to every ping message with a pong message.",
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-08",
    ),
    Clause(
        id="dcp.heartbeat.header-only",
        level=Level.MUST_NOT,
        section=_HB,
        text=(
            "The heartbeat messages are header-only, they MUST NOT contain any parts other than the"
            " header."
        ),
        observable=Observable.WIRE,
    ),
    Clause(
        id="dcp.heartbeat.reconnect-unknown",
        level=Level.MUST,
        section=_HB,
        text=(
            "If the broker receives a heartbeat message from a worker that is not registered for"
            " any"
            " service, the broker MUST respond with a reconnect message."
        ),
        observable=Observable.WIRE,
        roles=_BROKER,
        errata="E-DCP-08",
    ),
    Clause(
        id="dcp.worker.reregister-on-reconnect",
        level=Level.MUST,
        section=_HB,
        text=(
            "A worker that receives a reconnect message MUST send a registration message to the"
            " broker."
        ),
        observable=Observable.WIRE,
        roles=_WORKER,
        errata="E-DCP-13",
    ),
)

CATALOGUE = Catalogue("dcp", "dcp-v1.md", CLAUSES)
