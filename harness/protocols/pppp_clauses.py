"""Clause catalogue of PPPP, the Paranoid Pirate Publishing Protocol (`specs/pppp.txt`).

One clause per normative requirement of the document: every MUST / SHOULD / MAY sentence,
split where one sentence holds two requirements. The document is a mailing-list draft that
also states requirements in lowercase ("should be resend", "must be preserved", "may or may
not"), with "can", and as plain statements of how the protocol works ("Heartbeats are send
after an agreed-upon idle time"); E-PPPP-11 fixes how those are levelled: lowercase must ->
MUST, should -> SHOULD, may / can -> MAY, and a plain statement that defines a protocol
mechanism -> MUST. Besides those, the catalogue holds clauses that the codec and the
checkers must be able to name and that come from errata decisions, not from a sentence of
the document; their text starts with "(synthesized ...)":

* `pppp.wire.grammar`, the catch-all for the command formats of section Command
  Specifications;
* `pppp.wire.sequence-format`, `pppp.wire.nack-range-format`, `pppp.wire.channel-name`
  and `pppp.publisher.sequence-consecutive`, the encodings and numbering the document
  leaves open.

Quoted statements keep the document's spelling (typos are listed in E-PPPP-19).

`observable`:

* WIRE: a violation shows in messages that are sent: their bytes, fields, order, or their
  being sent at all (a harness playing the other role can provoke most of them, e.g. by
  NACKing an old message).
* TIMING: a violation shows only as a message that is not sent within a deadline, or is
  sent at the wrong time. The deadlines are the "agreed-upon" times of E-PPPP-12.
* INTERNAL: only inside the node (its storage, or what it delivers to its application).

`roles` uses "publisher" and "subscriber"; empty means both.

Errata ids refer to `docs/errata.md`. Ids are permanent:
never rename or reuse one.
"""

from __future__ import annotations

from harness.protocols.clauses import Catalogue, Clause, MUST, MUST_NOT, SHOULD, MAY, WIRE, TIMING, INTERNAL


ALL = ()
PUBLISHER = ("publisher",)
SUBSCRIBER = ("subscriber",)

_GOALS = "Goals"
_CONVERSATION = "Overall Conversation"
_COMMANDS = "Command Specifications"
_ACK = "ACK/NACK Specification"
_HEARTBEAT = "Heartbeating Specification"


CATALOGUE = Catalogue(
    "pppp",
    "pppp.txt",
    (
        # ------------------------------------------------------------------
        # Wire format (Command Specifications and the errata that complete it)
        Clause(
            "pppp.wire.grammar",
            MUST,
            _COMMANDS,
            "(synthesized) Every PPPP message has exactly the frames its command has in section"
            " Command Specifications, as completed by the errata: from subscriber to publisher"
            " SUBSCRIBE [0x01 + channel], ACK/NACK [0x02 + channel, sequence, NACK range ...],"
            " HEARTBEAT [0x03], CUSTOM [0x04, payload ...]; from publisher to subscriber"
            " PUBLISH [channel, sequence, payload ...] and HEARTBEAT [0x03]. There is no SYNC"
            " message and no unsubscribe; PUBLISH flows only from publisher to subscriber.",
            WIRE,
            ALL,
            "E-PPPP-05",
        ),
        Clause(
            "pppp.wire.sequence-format",
            MUST,
            _COMMANDS,
            "(synthesized from E-PPPP-01) A sequence number -- frame 1 of PUBLISH and frame 1"
            " of ACK/NACK, counting frames from 0 -- is an 8-byte unsigned integer, most"
            " significant byte first (network order). Document: \"a channel specific sequenze"
            " number\".",
            WIRE,
            ALL,
            "E-PPPP-01",
        ),
        Clause(
            "pppp.wire.nack-range-format",
            MUST,
            _COMMANDS,
            "(synthesized from E-PPPP-03) Each NACK frame of an ACK/NACK (frames 2 and later)"
            " is 16 bytes: the first and the last missing sequence number of one range,"
            " inclusive, each 8-byte unsigned big-endian, with first <= last. Document:"
            " \"optionally frames containing ranges of sequenze numbers that were not received"
            " (NACK)\".",
            WIRE,
            SUBSCRIBER,
            "E-PPPP-03",
        ),
        Clause(
            "pppp.wire.channel-name",
            MUST_NOT,
            _COMMANDS,
            "(synthesized from E-PPPP-06) A channel name MUST NOT start with a byte 0x00-0x04,"
            " so that the first frame of a PUBLISH can never be read as a command byte or as a"
            " ZeroMQ (un)subscription.",
            WIRE,
            ALL,
            "E-PPPP-06",
        ),
        # ------------------------------------------------------------------
        # Goals
        Clause(
            "pppp.publisher.sequence-consecutive",
            MUST,
            _GOALS,
            "(synthesized from E-PPPP-02) \"Allow subscribers to detect message dropouts,"
            " through sequence numbers.\" The sequence numbers of a channel start at 1 and"
            " increase by exactly 1 for each new message published on it; a resent message"
            " keeps its sequence number.",
            WIRE,
            PUBLISHER,
            "E-PPPP-02",
        ),
        # ------------------------------------------------------------------
        # Overall Conversation
        Clause(
            "pppp.conversation.subscribe-first",
            MUST,
            _CONVERSATION,
            "The first message in any conversation MUST be S:SUBSCRIBE.",
            WIRE,
            ALL,
            "E-PPPP-10",
        ),
        Clause(
            "pppp.conversation.sync-optional",
            MAY,
            _CONVERSATION,
            "P: SYNC (optional) ... Wether full state dump or backlog is used (or neither) is"
            " application specific.",
            WIRE,
            PUBLISHER,
            "E-PPPP-08",
        ),
        Clause(
            "pppp.custom.subscriber-may-send",
            MAY,
            _CONVERSATION,
            "The subscriber can send CUSTOM messages to the publisher.",
            WIRE,
            SUBSCRIBER,
            "E-PPPP-11",
        ),
        Clause(
            "pppp.custom.reply-optional",
            MAY,
            _CONVERSATION,
            "The publisher may or may not publish a reply.",
            WIRE,
            PUBLISHER,
            "E-PPPP-17",
        ),
        # ------------------------------------------------------------------
        # Command Specifications
        Clause(
            "pppp.subscribe.multiple-channels",
            MAY,
            _COMMANDS,
            "A subscriber can subscribe to multiple channels.",
            WIRE,
            SUBSCRIBER,
            "E-PPPP-10",
        ),
        Clause(
            "pppp.subscriber.ack-highest",
            MUST,
            _COMMANDS,
            "... a second frame containing the highest sequenze number received (ACK) and"
            " optionally frames containing ranges of sequenze numbers that were not received"
            " (NACK).",
            WIRE,
            SUBSCRIBER,
            "E-PPPP-04",
        ),
        # ------------------------------------------------------------------
        # ACK/NACK Specification
        Clause(
            "pppp.publisher.preserve-until-acked",
            MUST,
            _ACK,
            "The publisher MUST preserve each published message until it is acknowledged by"
            " all subscribers that are not permanently disconnected (see Heartbeating below).",
            WIRE,
            PUBLISHER,
            "E-PPPP-16",
        ),
        Clause(
            "pppp.publisher.resend-nacked",
            MUST,
            _ACK,
            "When an ACK/NACK message contains NACKs the publisher MUST resent the listed"
            " messages again.",
            WIRE,
            PUBLISHER,
            "E-PPPP-03",
        ),
        Clause(
            "pppp.subscriber.ack-cumulative",
            MAY,
            _ACK,
            "Not every message needs to be ACK/NACKed individually, allowing a single ACK/NACK"
            " to cover multiple messages.",
            WIRE,
            SUBSCRIBER,
            "E-PPPP-04",
        ),
        Clause(
            "pppp.subscriber.ack-within-first-idle",
            MUST,
            _ACK,
            "But an ACK/NACK MUST be send by the subscriber within an agreed-upon first idle"
            " time.",
            TIMING,
            SUBSCRIBER,
            "E-PPPP-14",
        ),
        Clause(
            "pppp.subscriber.ack-every-message",
            MUST,
            _ACK,
            "Collectively a subscriber MUST ACK/NACK every message ...",
            WIRE,
            SUBSCRIBER,
            "E-PPPP-04",
        ),
        Clause(
            "pppp.subscriber.ack-duplicates",
            MUST,
            _ACK,
            "Collectively a subscriber MUST ACK/NACK every message, even duplicates.",
            WIRE,
            SUBSCRIBER,
            "",
        ),
        Clause(
            "pppp.subscriber.delivery-order",
            MAY,
            _ACK,
            "It is application defined wether messages are delivered to the application in"
            " sequenze order.",
            INTERNAL,
            SUBSCRIBER,
            "",
        ),
        Clause(
            "pppp.subscriber.exactly-once",
            MUST,
            _ACK,
            "But the application MUST receive every message exactly once.",
            INTERNAL,
            SUBSCRIBER,
            "",
        ),
        Clause(
            "pppp.publisher.resend-on-silence",
            SHOULD,
            _ACK,
            "If no ACK/NACK is received from a subscriber after some multiple of the first idle"
            " time (usualy 3-5) and no message was send to the subscribe in that time then a"
            " message ... for that subscriber should be resend.",
            TIMING,
            PUBLISHER,
            "E-PPPP-15",
        ),
        Clause(
            "pppp.publisher.resend-prefer-last",
            SHOULD,
            _ACK,
            "... then a message, preferably the last, for that subscriber should be resend.",
            WIRE,
            PUBLISHER,
            "E-PPPP-15",
        ),
        Clause(
            "pppp.publisher.resend-shared-pick",
            MAY,
            _ACK,
            "The message to resend can be picked to cover the largest number of subscribers.",
            WIRE,
            PUBLISHER,
            "E-PPPP-15",
        ),
        Clause(
            "pppp.publisher.implicit-nack",
            MUST,
            _ACK,
            "In such a case an ACK/NACK reply from a subscriber implicitly NACKs the range of"
            " messages between the message send and the last message.",
            WIRE,
            PUBLISHER,
            "E-PPPP-15",
        ),
        # ------------------------------------------------------------------
        # Heartbeating Specification
        Clause(
            "pppp.heartbeat.interval",
            MUST,
            _HEARTBEAT,
            "Heartbeats are send after an agreed-upon idle time.",
            TIMING,
            ALL,
            "E-PPPP-12",
        ),
        Clause(
            "pppp.heartbeat.first-idle",
            MUST,
            _HEARTBEAT,
            "As a special case the first heartbeat is send after a shorter agreed-upon first"
            " idle time (see ACK/NACK).",
            TIMING,
            ALL,
            "E-PPPP-14",
        ),
        Clause(
            "pppp.heartbeat.implicit",
            MUST,
            _HEARTBEAT,
            "Any other traffic counts as implicit heartbeat.",
            TIMING,
            ALL,
            "E-PPPP-11",
        ),
        Clause(
            "pppp.heartbeat.disconnect-detection",
            MAY,
            _HEARTBEAT,
            "A peer can consider the other peer \"disconnected\" if no heartbeat arrives within"
            " some multiple of that interval (usually 3-5).",
            TIMING,
            ALL,
            "E-PPPP-13",
        ),
        Clause(
            "pppp.subscriber.resubscribe",
            MUST,
            _HEARTBEAT,
            "If the subscriber detects that the publisher has disconnected, it MUST send"
            " SUBSCRIBE again to start a new conversation.",
            TIMING,
            SUBSCRIBER,
            "E-PPPP-10",
        ),
        Clause(
            "pppp.publisher.stop-to-disconnected",
            SHOULD,
            _HEARTBEAT,
            "If the publisher detects that the subscriber has disconnected, it SHOULD stop"
            " sending it messages of any type.",
            TIMING,
            PUBLISHER,
            "",
        ),
        Clause(
            "pppp.publisher.preserve-for-disconnected",
            MUST,
            _HEARTBEAT,
            "Depending on the type of SYNC used pending and future messages must be preserved"
            " though.",
            INTERNAL,
            PUBLISHER,
            "E-PPPP-16",
        ),
        Clause(
            "pppp.publisher.drop-after-grace",
            MAY,
            _HEARTBEAT,
            "The backlog of messages can be droped after a grace period, after which a"
            " subscriber is considere permanently disconnected.",
            INTERNAL,
            PUBLISHER,
            "E-PPPP-16",
        ),
        Clause(
            "pppp.publisher.full-dump-after-grace",
            MUST,
            _HEARTBEAT,
            "If a subscriber reconnects after that grace period a full state dump must be used"
            " for SYNC.",
            INTERNAL,
            PUBLISHER,
            "E-PPPP-08",
        ),
    ),
)
