"""Clause catalogue of Dafka, ZeroMQ RFC 46 (`specs/dafka-46.md`).

One clause per normative requirement of the document: every MUST / MUST NOT / SHALL /
SHALL NOT / REQUIRED / SHOULD / SHOULD NOT / RECOMMENDED / MAY / OPTIONAL sentence, split
where one sentence holds two requirements (lowercase "shall" and "SHALL not" are read as
normative, see E-DAFKA-23). Besides those, the catalogue holds:

* `dafka.wire.grammar`, a synthesized catch-all for the ABNF of section Protocol Grammar;
* the indicative wire statements that codec errors and checkers must be able to name:
  the topic frame of each command ("The XPUB's topic frame is set to ...", and the
  grammar comment for ACK, which has no command section) and the meaning of the
  HEAD, FETCH and CONSUMER-HELLO fields. They are catalogued at level MUST.

`observable`:

* WIRE: a violation shows in messages that are sent: their bytes, fields, order, or
  their being sent at all (for example a reply to a message that had to be discarded).
* TIMING: a violation shows only as a message (or subscription, or connection) that
  is not sent within a deadline, or is sent at the wrong time.
* INTERNAL: only inside the node.

`roles` uses "producer", "consumer", "store", "tower"; the Interconnection Model and
wire-format clauses name the three node types of section Node types, because towers
are a separate node type that forwards beacons, not Dafka commands (E-DAFKA-13).

Errata ids refer to `docs/errata.md`. Ids are
permanent: never rename or reuse one.
"""

from __future__ import annotations

from harness.protocols.clauses import Catalogue, Clause, MUST, MUST_NOT, SHOULD, MAY, WIRE, TIMING, INTERNAL


NODES = ("producer", "consumer", "store")
PRODUCER = ("producer",)
CONSUMER = ("consumer",)
STORE = ("store",)
PRODUCER_STORE = ("producer", "store")
CONSUMER_STORE = ("consumer", "store")

_TOPICS = "Topics, Partitions and Records"
_INTERCONNECT = "Interconnection Model"
_SIGNATURE = "Protocol Signature"
_VERSIONING = "Versioning"
_GRAMMAR = "Protocol Grammar"
_COMMANDS = "Dafka Commands"
_STORE_HELLO = "The STORE-HELLO Command"
_CONSUMER_HELLO = "The CONSUMER-HELLO Command"
_RECORD = "The RECORD Command"
_HEAD = "The HEAD Command"
_FETCH = "The FETCH Command"
_DIRECT_RECORD = "The DIRECT-RECORD Command"
_GET_HEADS = "The GET-HEADS Command"
_DIRECT_HEAD = "The DIRECT-HEAD Command"
_SUBSCRIPTIONS = "ZeroMQ Subscriptions"
_PRODUCER_SUBS = "Producer Subscriptions"
_CONSUMER_SUBS = "Consumer Subscriptions"
_STORE_SUBS = "Store Subscriptions"


CATALOGUE = Catalogue(
    "dafka",
    "dafka-46.md",
    (
        # ------------------------------------------------------------------
        # Topics, Partitions and Records
        Clause(
            "dafka.topic.no-count-limit",
            MUST_NOT,
            _TOPICS,
            "A Dafka cluster SHALL not place any restriction on the total number of topics other than"
            " physicals due to the amount of available memory or disk space.",
            INTERNAL,
            (),
            "E-DAFKA-23",
        ),
        Clause(
            "dafka.topic.ascii-names",
            SHOULD,
            _TOPICS,
            "Though it is RECOMMENDED to use only characters from the ASCII character set.",
            WIRE,
            ("producer", "consumer"),
            "E-DAFKA-10",
        ),
        Clause(
            "dafka.topic.at-least-one-partition",
            MUST,
            _TOPICS,
            "Each Dafka topic SHALL consist of at least one partition.",
            INTERNAL,
            (),
            "",
        ),
        Clause(
            "dafka.partition.one-partition-per-producer",
            MUST,
            _TOPICS,
            "... each producer MUST publish records to exactly one partition ...",
            WIRE,
            PRODUCER,
            "",
        ),
        Clause(
            "dafka.partition.single-producer",
            MUST,
            _TOPICS,
            "... further only one producer SHALL ever publish to the same partition.",
            WIRE,
            PRODUCER,
            "E-DAFKA-21",
        ),
        Clause(
            "dafka.partition.name-is-producer-uuid",
            MUST,
            _TOPICS,
            "In order to make this connection obvious the name of the partition SHALL be the"
            " producer's node UUID.",
            WIRE,
            PRODUCER,
            "E-DAFKA-12",
        ),
        Clause(
            "dafka.record.offset-starts-at-zero",
            MUST,
            _TOPICS,
            "The first record of each partition SHALL have the offset 0.",
            WIRE,
            PRODUCER,
            "E-DAFKA-04",
        ),
        Clause(
            "dafka.record.offset-increments",
            MUST,
            _TOPICS,
            "Each following record's offset SHALL be the previous record's offset incremented by 1.",
            WIRE,
            PRODUCER,
            "E-DAFKA-21",
        ),
        # ------------------------------------------------------------------
        # Interconnection Model
        Clause(
            "dafka.interconnect.tower-sockets",
            MUST,
            _INTERCONNECT,
            "Each node SHALL create a ZeroMQ PUB and a ZeroMQ SUB socket to communicate with the towers.",
            TIMING,
            NODES,
            "E-DAFKA-13",
        ),
        Clause(
            "dafka.interconnect.tower-pub-connect",
            MUST,
            _INTERCONNECT,
            "The PUB socket SHALL be connected to at least one tower's SUB socket ...",
            TIMING,
            NODES,
            "E-DAFKA-13",
        ),
        Clause(
            "dafka.interconnect.tower-sub-connect",
            MUST,
            _INTERCONNECT,
            "... and the SUB socket SHALL be connected to at least one tower's PUB socket.",
            TIMING,
            NODES,
            "E-DAFKA-13",
        ),
        Clause(
            "dafka.interconnect.xpub-bind",
            MUST,
            _INTERCONNECT,
            "Each node SHALL create a ZeroMQ XPUB socket and bind it to an address that can be"
            " reached by the other nodes.",
            WIRE,
            NODES,
            "E-DAFKA-13",
        ),
        Clause(
            "dafka.interconnect.address-beacon",
            MUST,
            _INTERCONNECT,
            "The node SHALL send this address at a regular interval to all connected towers.",
            TIMING,
            NODES,
            "E-DAFKA-13",
        ),
        Clause(
            "dafka.interconnect.second-sub",
            MUST,
            _INTERCONNECT,
            "Each node SHALL create a second ZeroMQ SUB socket.",
            TIMING,
            NODES,
            "",
        ),
        Clause(
            "dafka.interconnect.connect-on-discovery",
            MUST,
            _INTERCONNECT,
            "When a node discovers another node, it SHALL connect this socket, to the other nodes"
            " XPUB socket.",
            TIMING,
            NODES,
            "E-DAFKA-13",
        ),
        Clause(
            "dafka.interconnect.disconnect-unresponsive",
            MAY,
            _INTERCONNECT,
            "A node MAY disconnect its SUB socket if the peer has failed to respond within some time"
            " (see Heartbeating).",
            TIMING,
            NODES,
            "E-DAFKA-14",
        ),
        # ------------------------------------------------------------------
        # Protocol Signature, Versioning, Protocol Grammar, Dafka Commands
        Clause(
            "dafka.wire.signature",
            MUST,
            _SIGNATURE,
            "Every Dafka message sent SHALL start with the ZRE protocol signature, %xAA %xA0.",
            WIRE,
            NODES,
            "E-DAFKA-01",
        ),
        Clause(
            "dafka.wire.signature-discard",
            MUST,
            _SIGNATURE,
            "A node SHALL silently discard any message received that does not start with these two"
            " octets.",
            WIRE,
            NODES,
            "E-DAFKA-01",
        ),
        Clause(
            "dafka.wire.version",
            MUST,
            _VERSIONING,
            "A version number octet %x01 shall follow the signature.",
            WIRE,
            NODES,
            "E-DAFKA-02",
        ),
        Clause(
            "dafka.wire.version-discard",
            MUST,
            _VERSIONING,
            "A node SHALL discard messages that do not contain a valid version number.",
            WIRE,
            NODES,
            "E-DAFKA-02",
        ),
        Clause(
            "dafka.wire.grammar",
            MUST,
            _GRAMMAR,
            "(Synthesized clause, not a sentence of the document.) Every message SHALL follow the"
            " ABNF grammar of section Protocol Grammar: signature, command identifier, version, then"
            " the fields of its command in the order and with the types given there (string,"
            " strings, number-1, number-4, number-8, frame), with the meanings given in the"
            " grammar comments.",
            WIRE,
            NODES,
            "E-DAFKA-04",
        ),
        Clause(
            "dafka.wire.topic-ack",
            MUST,
            _GRAMMAR,
            "Ack from a stores to a producer. Topic is the address of the producer (partition).",
            WIRE,
            STORE,
            "",
        ),
        Clause(
            "dafka.wire.topic-frame",
            MUST,
            _COMMANDS,
            "Each command MUST contain as first frame the name of the ZeroMQ topic it is published to.",
            WIRE,
            NODES,
            "E-DAFKA-03",
        ),
        # ------------------------------------------------------------------
        # The STORE-HELLO Command
        Clause(
            "dafka.store.hello-on-subscription",
            MUST,
            _STORE_HELLO,
            "When a store receives a store hello subscription on its XPUB socket it SHALL send a"
            " STORE-HELLO command to the subscriber.",
            TIMING,
            STORE,
            "",
        ),
        Clause(
            "dafka.wire.topic-store-hello",
            MUST,
            _STORE_HELLO,
            "The XPUB's topic frame is set to the STORE-HELLO command's ID concatenated with the"
            " address of the consumer received by the subscription message.",
            WIRE,
            STORE,
            "",
        ),
        # ------------------------------------------------------------------
        # The CONSUMER-HELLO Command
        Clause(
            "dafka.consumer.hello-reply",
            SHOULD,
            _CONSUMER_HELLO,
            "When a consumer receives a STORE-HELLO command it SHOULD reply with a CONSUMER-HELLO"
            " command.",
            TIMING,
            CONSUMER,
            "",
        ),
        Clause(
            "dafka.consumer.hello-subjects",
            MUST,
            _CONSUMER_HELLO,
            "The CONSUMER-HELLO command has two fields: the address of the consumer and a list of"
            " dafka topics it is subscribed to.",
            WIRE,
            CONSUMER,
            "",
        ),
        Clause(
            "dafka.consumer.no-hello-without-subscription",
            MUST_NOT,
            _CONSUMER_HELLO,
            "If the consumer is not subscribed to any dafka topic it MUST NOT send a CONSUMER-HELLO"
            " command.",
            WIRE,
            CONSUMER,
            "",
        ),
        Clause(
            "dafka.wire.topic-consumer-hello",
            MUST,
            _CONSUMER_HELLO,
            "The XPUB's topic frame is set to the CONSUMER-HELLO command's ID concatenated with the"
            " address of the store the received by the STORE-HELLO command.",
            WIRE,
            CONSUMER,
            "E-DAFKA-18",
        ),
        # ------------------------------------------------------------------
        # The RECORD Command
        Clause(
            "dafka.record.publish-with-record",
            MUST,
            _RECORD,
            "When a producer wishes to publish a record it SHALL use the RECORD command.",
            TIMING,
            PRODUCER,
            "",
        ),
        Clause(
            "dafka.wire.single-frame-content",
            MUST,
            _RECORD,
            "... the records content defined as one ZeroMQ frame. Dafka does not support multi-frame"
            " message contents.",
            WIRE,
            PRODUCER_STORE,
            "E-DAFKA-03",
        ),
        Clause(
            "dafka.producer.keep-until-ack",
            MUST_NOT,
            _RECORD,
            "A producer MUST NOT delete send records before receiving at least one ACK command.",
            TIMING,
            PRODUCER,
            "E-DAFKA-17",
        ),
        Clause(
            "dafka.wire.topic-record",
            MUST,
            _RECORD,
            "The XPUB's topic frame is set to the RECORD command's ID concatenated with the dafka"
            " topics name the record is published to.",
            WIRE,
            PRODUCER,
            "E-DAFKA-20",
        ),
        # ------------------------------------------------------------------
        # The HEAD Command
        Clause(
            "dafka.producer.head-interval",
            MUST,
            _HEAD,
            "After a producer published its first record it SHALL send the HEAD command at regular a"
            " interval.",
            TIMING,
            PRODUCER,
            "E-DAFKA-14",
        ),
        Clause(
            "dafka.producer.head-sequence",
            MUST,
            _HEAD,
            "The HEAD command contains two fields: the dafka topic this producers publishes records to"
            " and the offset of the last published record.",
            WIRE,
            PRODUCER,
            "E-DAFKA-16",
        ),
        Clause(
            "dafka.wire.topic-head",
            MUST,
            _HEAD,
            "The XPUB's topic frame is set to the HEAD command's ID concatenated with the address of"
            " the producer (partition).",
            WIRE,
            PRODUCER,
            "E-DAFKA-05",
        ),
        # ------------------------------------------------------------------
        # The FETCH Command
        Clause(
            "dafka.fetch.on-gap",
            MUST,
            _FETCH,
            "A consumer or store SHALL send the FETCH command if it detects it missed a record in a"
            " partition.",
            TIMING,
            CONSUMER_STORE,
            "",
        ),
        Clause(
            "dafka.fetch.first-missed-and-count",
            MUST,
            _FETCH,
            "The FETCH command contains three fields: the dafka topic it missed the topic, the offset"
            " first missed record and the count of missed records.",
            WIRE,
            CONSUMER_STORE,
            "E-DAFKA-19",
        ),
        Clause(
            "dafka.wire.topic-fetch",
            MUST,
            _FETCH,
            "The XPUB's topic frame is set to the FETCH command's ID concatenated with the consumers"
            " address.",
            WIRE,
            CONSUMER_STORE,
            "E-DAFKA-06",
        ),
        # ------------------------------------------------------------------
        # The DIRECT-RECORD Command
        Clause(
            "dafka.fetch.check-stored",
            MUST,
            _DIRECT_RECORD,
            "Upon receiving a FETCH command a producer or store SHALL check if it has stored the"
            " requested record(s).",
            INTERNAL,
            PRODUCER_STORE,
            "",
        ),
        Clause(
            "dafka.fetch.direct-record-reply",
            MUST,
            _DIRECT_RECORD,
            "In case a requested record is available it SHALL send a DIRECT-RECORD command.",
            TIMING,
            PRODUCER_STORE,
            "E-DAFKA-19",
        ),
        Clause(
            "dafka.fetch.ascending-order",
            MUST,
            _DIRECT_RECORD,
            "The records requested by the FETCH command SHALL be send according to their offset in"
            " ascending order.",
            WIRE,
            PRODUCER_STORE,
            "E-DAFKA-19",
        ),
        Clause(
            "dafka.wire.topic-direct-record",
            MUST,
            _DIRECT_RECORD,
            "The XPUB's topic frame is set to the DIRECT-RECORD command's ID concatenated with the"
            " address of the producer or store.",
            WIRE,
            PRODUCER_STORE,
            "E-DAFKA-07",
        ),
        # ------------------------------------------------------------------
        # The GET-HEADS Command
        Clause(
            "dafka.consumer.get-heads-on-subscribe",
            MUST,
            _GET_HEADS,
            "If a consumer subscribes to a dafka topic it SHALL sent a GET-HEADS command in order to"
            " get the heads for each partition of that topic.",
            TIMING,
            CONSUMER,
            "",
        ),
        Clause(
            "dafka.wire.topic-get-heads",
            MUST,
            _GET_HEADS,
            "The XPUB's topic frame is set to the GET-HEADS command's ID concatenated with the topic"
            " for which partition heads are requested for.",
            WIRE,
            CONSUMER,
            "E-DAFKA-20",
        ),
        # ------------------------------------------------------------------
        # The DIRECT-HEAD Command
        Clause(
            "dafka.producer.direct-head-reply",
            MUST,
            _DIRECT_HEAD,
            "After receiving a GET-HEADS command a producer SHALL send a DIRECT-HEAD command if it"
            " publishes records to dafka topic requested by the GET-HEADS command.",
            TIMING,
            PRODUCER,
            "E-DAFKA-15",
        ),
        Clause(
            "dafka.store.direct-head-per-partition",
            MUST,
            _DIRECT_HEAD,
            "After receiving a GET-HEADS command a store SHALL send one DIRECT-HEAD command for each"
            " partition it has records stored on the requested dafka topic by the GET-HEADS command.",
            TIMING,
            STORE,
            "E-DAFKA-16",
        ),
        Clause(
            "dafka.wire.topic-direct-head",
            MUST,
            _DIRECT_HEAD,
            "The XPUB's topic frame is set to the DIRECT-HEAD command's ID concatenated with address"
            " of the producer or store.",
            WIRE,
            PRODUCER_STORE,
            "E-DAFKA-08",
        ),
        # ------------------------------------------------------------------
        # ZeroMQ Subscriptions
        Clause(
            "dafka.subscription.register",
            MUST,
            _SUBSCRIPTIONS,
            "Because Dafka nodes are connected through PUB and SUB sockets each node MUST register"
            " subscriptions with the other nodes in order to receive messages.",
            TIMING,
            NODES,
            "E-DAFKA-20",
        ),
        # Producer Subscriptions
        Clause(
            "dafka.subscription.producer-ack",
            MUST,
            _PRODUCER_SUBS,
            "A producer SHALL subscribe to ACK commands for its own partition by concatenating the ACK"
            " command ID and the partition name which equals the producer's address.",
            TIMING,
            PRODUCER,
            "",
        ),
        Clause(
            "dafka.subscription.producer-fetch",
            MUST,
            _PRODUCER_SUBS,
            "A producer SHALL subscribe to FETCH commands for its own partition by concatenating the"
            " FETCH command ID and the partition name which equals the producer's address.",
            TIMING,
            PRODUCER,
            "E-DAFKA-06",
        ),
        # Consumer Subscriptions
        Clause(
            "dafka.subscription.consumer-direct-record",
            MUST,
            _CONSUMER_SUBS,
            "A consumer SHALL subscribe to DIRECT-RECORD commands addressed to it by concatenating the"
            " DIRECT-RECORD command ID and its consumer address.",
            TIMING,
            CONSUMER,
            "E-DAFKA-07",
        ),
        Clause(
            "dafka.subscription.consumer-direct-head",
            MUST,
            _CONSUMER_SUBS,
            "A consumer SHALL subscribe to DIRECT-HEAD commands addressed to it by concatenating the"
            " DIRECT-HEAD command ID and its consumer address.",
            TIMING,
            CONSUMER,
            "E-DAFKA-08",
        ),
        Clause(
            "dafka.subscription.consumer-store-hello",
            MUST,
            _CONSUMER_SUBS,
            "A consumer SHALL subscribe to STORE-HELLO commands by concatenating the STORE-HELLO"
            " command ID and the consumer address.",
            TIMING,
            CONSUMER,
            "",
        ),
        Clause(
            "dafka.subscription.consumer-record",
            MUST,
            _CONSUMER_SUBS,
            "For each dafka topic a consumer is subscribed to it SHALL subscribe to RECORD commands by"
            " concatenating the RECORD command ID and topic name.",
            TIMING,
            CONSUMER,
            "E-DAFKA-20",
        ),
        Clause(
            "dafka.subscription.consumer-head",
            MUST,
            _CONSUMER_SUBS,
            "For each dafka topic a consumer is subscribed to it SHALL subscribe to HEAD commands by"
            " concatenating the HEAD command ID and topic name.",
            TIMING,
            CONSUMER,
            "E-DAFKA-05",
        ),
        Clause(
            "dafka.subscription.consumer-ack",
            MAY,
            _CONSUMER_SUBS,
            "For each partition of each dafka topic a consumer is subscribed to it MAY subscribe to"
            " ACK commands by concatenating the ACK command ID and the partition name which equals"
            " the producer's address.",
            TIMING,
            CONSUMER,
            "",
        ),
        # Store Subscriptions
        Clause(
            "dafka.subscription.store-record",
            MUST,
            _STORE_SUBS,
            "A store SHALL subscribe to all RECORD commands by subscribing the RECORD command ID.",
            TIMING,
            STORE,
            "",
        ),
        Clause(
            "dafka.subscription.store-head",
            MUST,
            _STORE_SUBS,
            "A store SHALL subscribe to all HEAD commands by subscribing the HEAD command ID.",
            TIMING,
            STORE,
            "",
        ),
        Clause(
            "dafka.subscription.store-direct-record",
            MUST,
            _STORE_SUBS,
            "A store SHALL subscribe to DIRECT-RECORD commands addressed to it by concatenating the"
            " DIRECT-RECORD command ID and its store address.",
            TIMING,
            STORE,
            "E-DAFKA-07",
        ),
        Clause(
            "dafka.subscription.store-fetch",
            MUST,
            _STORE_SUBS,
            "A store SHALL subscribe to all FETCH commands by subscribing to the FETCH command ID.",
            TIMING,
            STORE,
            "",
        ),
        Clause(
            "dafka.subscription.store-get-heads",
            MUST,
            _STORE_SUBS,
            "A store SHALL subscribe to GET-HEADS commands by subscribing to the GET-HEADS command ID.",
            TIMING,
            STORE,
            "",
        ),
        Clause(
            "dafka.subscription.store-consumer-hello",
            MUST,
            _STORE_SUBS,
            "A store SHALL subscribe to CONSUMER-HELLO commands by subscribing to the CONSUMER-HELLO"
            " command ID",
            TIMING,
            STORE,
            "E-DAFKA-18",
        ),
    ),
)
