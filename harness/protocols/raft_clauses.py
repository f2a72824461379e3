"""Clause catalogue of ZMQ Raft (`specs/zmq-raft.md`).

One clause per normative requirement of the document, split where one sentence holds two
requirements. The document has no RFC 2119 section and writes its requirements in
lowercase ("must have a unique PEER ID", "A client should establish ...", "may ask ...")
or as plain statements ("the requesting party repeats sending the last request message",
"The peer will respond with up to REQUEST_ENTRIES_PIPELINES ... response messages").
They are levelled as: must -> MUST, should -> SHOULD, may -> MAY, a plain statement of
what a node does -> MUST, a "preferred" value -> SHOULD. Frame tables are normative as a
whole (`raft.wire.grammar`); a table cell is catalogued on its own only where it states
behaviour ("may be 0 to stop server from sending ...", "this frame must be ignored").

Besides the document's statements, the catalogue holds synthesized clauses whose text
starts with "(synthesized ...)":

* `raft.wire.grammar`, the catch-all for the frame tables;
* `raft.entries.committed-only`, from an erratum decision;
* the Raft algorithm properties the harness checks (`raft.safety.*`,
  `raft.algorithm.leader-heartbeat`, `raft.kv.linearizable`). They come from the Raft paper (Ongaro and
  Ousterhout, "In Search of an Understandable Consensus Algorithm", 2014), which this
  protocol implements, not from this document.

Quoted statements keep the document's spelling (typos are listed in E-RAFT-25).

`observable`:

* WIRE: a violation shows in messages that are sent: their bytes, fields, order, or their
  being sent at all (including the ZMTP socket type of a connection).
* TIMING: a violation shows only as a message that is not sent within a deadline, or is
  sent too early or too late.
* INTERNAL: only inside the node.

`roles` uses "peer", "client" and "subscriber" (the StateBroadcast subscriber); empty
means all.

Errata ids refer to `docs/errata.md`. Ids are
permanent: never rename or reuse one.
"""

from __future__ import annotations

from harness.protocols.clauses import Catalogue, Clause, MUST, MUST_NOT, SHOULD, MAY, WIRE, TIMING, INTERNAL


ALL = ()
PEER = ("peer",)
CLIENT = ("client",)
CLIENT_SUBSCRIBER = ("client", "subscriber")

_PROTOCOL = "ZMQ RAFT protocol"
_TYPES = "Data types"
_PEER = "Peer"
_CLIENT = "Client"
_VOTE = "RequestVote RPC"
_APPEND = "AppendEntries RPC"
_SNAPSHOT = "InstallSnapshot RPC"
_CONFIG = "RequestConfig RPC"
_UPDATE = "RequestUpdate RPC"
_ENTRIES = "RequestEntries RPC"
_BROADCAST_URL = "RequestBroadcastStateUrl RPC"
_BROADCAST = "StateBroadcast MSG"
_RAFT = "Raft algorithm (Raft paper, not this document)"

_ALGORITHM = (
    "(synthesized from the Raft paper (Ongaro and Ousterhout 2014), which this protocol"
    " implements; not from this document) "
)

_FROM_PAPER = (
    "(synthesized: a safety property of the Raft algorithm, Figure 3 of the Raft paper"
    " (Ongaro and Ousterhout 2014) that this protocol implements; not from this document) "
)


CATALOGUE = Catalogue(
    "raft",
    "zmq-raft.md",
    (
        # ------------------------------------------------------------------
        # Wire format: frames, message types, data types
        Clause(
            "raft.wire.grammar",
            MUST,
            _PROTOCOL,
            "(synthesized) Every message has exactly the frames of its table (the request and"
            " response frames of each RPC, StateBroadcast), in the table's order, each frame"
            " decodable as its declared type; optional frames may only be left off from the"
            " end. A peer's request and response are preceded on the wire only by the"
            " ROUTER/DEALER envelope.",
            WIRE,
            ALL,
            "E-RAFT-23",
        ),
        Clause(
            "raft.wire.message-type",
            MUST,
            _PROTOCOL,
            "(synthesized from frame 2 of each request table, \"bytes |  0x3f | message"
            " type\") The message type is one byte: RequestVote 0x3f, AppendEntries 0x2b,"
            " InstallSnapshot 0x24, RequestConfig 0x5e, RequestUpdate 0x3d, RequestEntries 0x3c"
            " (the document says 0x3d), RequestLogInfo 0x25, RequestBroadcastStateUrl 0x2a.",
            WIRE,
            ALL,
            "E-RAFT-01",
        ),
        Clause(
            "raft.wire.message-id",
            MUST,
            _PEER,
            "The first frame of all the above message types identifies each sent message for"
            " debouncing. This frame type is `uint` and consists of 1 to 3 bytes. Its value"
            " starts at 1 and increases monotonically for each subsequent message until value"
            " reaches 16777216 at which it becomes 0.",
            WIRE,
            PEER,
            "E-RAFT-03",
        ),
        Clause(
            "raft.wire.uint",
            MUST,
            _TYPES,
            "`uint` - an unsigned least significant byte first variable length integer"
            " (1 - 8 bytes)",
            WIRE,
            ALL,
            "E-RAFT-05",
        ),
        Clause(
            "raft.wire.bool",
            MUST,
            _TYPES,
            "`bool` - a boolean (true: body must have at least 1 byte and the first byte must"
            " not be 0, false: otherwise)",
            WIRE,
            ALL,
            "E-RAFT-06",
        ),
        Clause(
            "raft.wire.string",
            MUST,
            _TYPES,
            "`string` - an utf-8 encoded string of zero or more bytes (no null termination)",
            WIRE,
            ALL,
            "",
        ),
        Clause(
            "raft.wire.msgpack",
            MUST,
            _TYPES,
            "`json` - a MessagePack encoded JSON data: http://msgpack.org",
            WIRE,
            ALL,
            "E-RAFT-07",
        ),
        Clause(
            "raft.wire.reqid",
            MUST,
            _TYPES,
            "`reqid` - 12 byte unique request id",
            WIRE,
            ALL,
            "E-RAFT-09",
        ),
        Clause(
            "raft.wire.reqid-layout",
            MUST,
            _TYPES,
            "The `reqid` 12-byte request id is constructed as follows: 4-byte value"
            " representing the seconds since the Unix epoch (most significant byte first);"
            " 3-byte machine identifier; 2-byte process id, and 3-byte counter, starting with"
            " a random value.",
            WIRE,
            CLIENT,
            "E-RAFT-09",
        ),
        Clause(
            "raft.reqid.unique",
            MUST,
            _TYPES,
            "`reqid` - 12 byte unique request id ... 3-byte counter, starting with a random"
            " value.",
            WIRE,
            CLIENT,
            "E-RAFT-09",
        ),
        Clause(
            "raft.wire.entry",
            MUST,
            _TYPES,
            "The `entry` data is constructed as follows: 12-bytes `reqid`; 1-byte log entry"
            " type: 0 - state, 1 - config, 2 - checkpoint; 7-byte log entry term (least"
            " significant byte first); arbitrary log data",
            WIRE,
            ALL,
            "E-RAFT-02",
        ),
        # ------------------------------------------------------------------
        # Peer
        Clause(
            "raft.peer.router-socket",
            MUST,
            _PEER,
            "Each ZMQ peer opens a single ZMQ ROUTER socket and binds it to the indicated in"
            " the configuration ip address and port.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.peer.unique-id",
            MUST,
            _PEER,
            "Each ZMQ peer must have a unique PEER ID (`string`) ...",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.peer.config-shared",
            MUST,
            _PEER,
            "Each ZMQ peer must have ... an URL of its ROUTER socket. Information about each"
            " peer's ID and (external) URL must be available to all other peers in the"
            " cluster.",
            INTERNAL,
            PEER,
            "",
        ),
        Clause(
            "raft.peer.dealer-per-peer",
            MUST,
            _PEER,
            "Each ZMQ peer opens as many ZMQ DEALER sockets as there are other peers in the"
            " cluster, connected to the other peers' ROUTER sockets.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.peer.cluster-ident",
            MUST,
            _VOTE,
            "(frame 3 of RequestVote, AppendEntries and InstallSnapshot requests) \"bytes |"
            " | cluster ident\"",
            WIRE,
            PEER,
            "E-RAFT-10",
        ),
        Clause(
            "raft.rpc.timeout-default",
            SHOULD,
            _PEER,
            "Peer's RPC expects a response to be received within RPC_TIMEOUT (preferred 50 ms)"
            " interval.",
            TIMING,
            PEER,
            "E-RAFT-11",
        ),
        Clause(
            "raft.rpc.retry-after-timeout",
            MUST,
            _PEER,
            "When the response is not received within this interval the requesting party"
            " repeats sending the last request message.",
            TIMING,
            PEER,
            "E-RAFT-04",
        ),
        Clause(
            "raft.rpc.longer-timeout",
            MAY,
            _PEER,
            "For some message types: AppendEntries, InstallSnapshot the RPC_TIMEOUT may be"
            " longer ...",
            TIMING,
            PEER,
            "E-RAFT-11",
        ),
        Clause(
            "raft.rpc.timeout-bound",
            MUST_NOT,
            _PEER,
            "... but not longer than the half of the ELECTION_TIMEOUT_MIN (preferred 200 ms).",
            TIMING,
            PEER,
            "E-RAFT-11",
        ),
        Clause(
            "raft.rpc.response-id",
            MUST,
            _VOTE,
            "(frame 1 of the RequestVote, AppendEntries and InstallSnapshot responses)"
            " \"uint | | request message id\"",
            WIRE,
            PEER,
            "E-RAFT-04",
        ),
        Clause(
            "raft.rpc.debounce",
            MUST,
            _PEER,
            "The first frame of all the above message types identifies each sent message for"
            " debouncing.",
            INTERNAL,
            PEER,
            "E-RAFT-04",
        ),
        # ------------------------------------------------------------------
        # Client
        Clause(
            "raft.client.dealer-socket",
            SHOULD,
            _CLIENT,
            "A client should establish a ZMQ DEALER socket and connect it at first to any"
            " number of the known cluster peer's ROUTER sockets.",
            WIRE,
            CLIENT,
            "",
        ),
        Clause(
            "raft.client.request-config",
            SHOULD,
            _CLIENT,
            "Client should then ask each known peer at a time about the cluster state, peer"
            " URLs and the current LEADER ID using a RequestConfig RPC.",
            WIRE,
            CLIENT,
            "E-RAFT-14",
        ),
        Clause(
            "raft.client.repeat-config",
            SHOULD,
            _CLIENT,
            "In case the cluster is in transit state the client should repeat sending"
            " RequestConfig messages until the response contains a valid LEADER ID.",
            TIMING,
            CLIENT,
            "E-RAFT-14",
        ),
        Clause(
            "raft.client.connect-leader",
            SHOULD,
            _CLIENT,
            "Upon success the client should disconnect its DEALER socket from all other peers"
            " and connect it only (or leave the connection) to the leader's ROUTER URL.",
            WIRE,
            CLIENT,
            "E-RAFT-13",
        ),
        Clause(
            "raft.client.update-peers",
            SHOULD,
            _CLIENT,
            "The client should also update its list of all known peers in the cluter.",
            INTERNAL,
            CLIENT,
            "",
        ),
        Clause(
            "raft.client.periodic-config",
            MAY,
            _CLIENT,
            "The client may ask for the current cluster status and configuration periodically"
            " using RequestConfig RPC.",
            WIRE,
            CLIENT,
            "",
        ),
        Clause(
            "raft.client.follow-leader",
            SHOULD,
            _CLIENT,
            "The client should send all following messages to the last known elected leader.",
            WIRE,
            CLIENT,
            "",
        ),
        Clause(
            "raft.client.response-ttl",
            SHOULD,
            _CLIENT,
            "The client waits for the response from a peer longer than SERVER_RESPONSE_TTL"
            " (preferred: 500 ms) ...",
            TIMING,
            CLIENT,
            "E-RAFT-14",
        ),
        Clause(
            "raft.client.broken-leader",
            SHOULD,
            _CLIENT,
            "In the first scenario the client should connect its DEALER socket to the leader's"
            " URL indicated in the last response, disconnect from othe peer's and send the last"
            " request message again to the new leader.",
            WIRE,
            CLIENT,
            "E-RAFT-14",
        ),
        Clause(
            "raft.client.broken-leader-search",
            SHOULD,
            _CLIENT,
            "In the second scenario the client should connect its DEALER sockets to all known"
            " cluster peers, wait a SERVER_ELECTION_GRACE_MS (preferred: 300 ms) interval and"
            " send the last request message again to each peer in turn until it receives a"
            " positive response or a negative response but with the valid information about"
            " the currently elected LEADER ID.",
            TIMING,
            CLIENT,
            "E-RAFT-14",
        ),
        Clause(
            "raft.client.reconnect-leader",
            SHOULD,
            _CLIENT,
            "Upon that the client should connect its DEALER socket to the current leader's URL"
            " and disconnect from all other peers.",
            WIRE,
            CLIENT,
            "E-RAFT-14",
        ),
        # ------------------------------------------------------------------
        # AppendEntries and InstallSnapshot responses
        Clause(
            "raft.append.conflict-hint",
            MAY,
            _APPEND,
            "optional: 4 | uint | | updating log conflict TERM; 5 | uint | | updating log"
            " conflict LOG INDEX",
            WIRE,
            PEER,
            "E-RAFT-20",
        ),
        Clause(
            "raft.snapshot.resume-offset",
            MUST,
            _SNAPSHOT,
            "optional: 3 | uint | | indicate a byte offset to start sending a next snapshot"
            " chunk from",
            WIRE,
            PEER,
            "E-RAFT-20",
        ),
        # ------------------------------------------------------------------
        # RequestConfig
        Clause(
            "raft.config.peers-optional",
            MAY,
            _CONFIG,
            "optional: 4 | json | | cluster config as a JSON array of tuples containing PEER ID"
            " and PEER URL as an array of strings",
            WIRE,
            PEER,
            "E-RAFT-13",
        ),
        # ------------------------------------------------------------------
        # RequestUpdate
        Clause(
            "raft.update.reqid-in-entry",
            MUST,
            _UPDATE,
            "To make this RPC idempotent, the unique request id used in this message is"
            " written as a part of the log entry.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.update.idempotent",
            MUST,
            _UPDATE,
            "To make this RPC idempotent ...",
            WIRE,
            PEER,
            "E-RAFT-16",
        ),
        Clause(
            "raft.update.reqid-freshness",
            MUST,
            _UPDATE,
            "This RPC also defines the time during which the `reqid` is fresh. If the"
            " RequestUpdate RPC doesn't succeed within that time (due to the cluster down time"
            " or network outage) it will be rejected if finally reaches the cluster.",
            WIRE,
            PEER,
            "E-RAFT-16",
        ),
        Clause(
            "raft.update.index-when-committed",
            MUST,
            _UPDATE,
            "3 | json | | upon status is true (a success) a committed LOG INDEX as a JSON"
            " number ... If the update status is `true` but there is no 3rd frame in the"
            " response it indicates that the update was accepted but the log entry hasn't been"
            " committed yet.",
            WIRE,
            PEER,
            "E-RAFT-15",
        ),
        Clause(
            "raft.update.accepted-repeat",
            MAY,
            _UPDATE,
            "The response message in this form may be sent several times by the peer ...",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.update.reset-timeout",
            SHOULD,
            _UPDATE,
            "... and each time it is received by the client it should reset the client's RPC"
            " timeout clock.",
            TIMING,
            CLIENT,
            "E-RAFT-14",
        ),
        Clause(
            "raft.update.expired",
            MUST,
            _UPDATE,
            "Once the response's update status is `false` and the 3rd frame is missing,"
            " response indicates that a request has expired (a `reqid` is older than"
            " REQUEST_UPDATE_TTL (default: 8 hours).",
            WIRE,
            PEER,
            "E-RAFT-15",
        ),
        Clause(
            "raft.update.not-leader",
            SHOULD,
            _UPDATE,
            "Once the response's update status is `false` but the 3rd frame is included the"
            " client should follow the broken leader state procedure.",
            WIRE,
            CLIENT,
            "E-RAFT-15",
        ),
        # ------------------------------------------------------------------
        # RequestEntries
        Clause(
            "raft.entries.pipeline",
            MUST,
            _ENTRIES,
            "RequestEntries RPC responses are being sent in a pipeline. The peer will respond"
            " with up to REQUEST_ENTRIES_PIPELINES (default: 5) response messages prior to"
            " receiving the follow up client request messages.",
            WIRE,
            PEER,
            "E-RAFT-19",
        ),
        Clause(
            "raft.entries.committed-only",
            MUST,
            _ENTRIES,
            "(synthesized from E-RAFT-19) A RequestEntries response carries only committed"
            " log entries (or a snapshot of applied state).",
            WIRE,
            PEER,
            "E-RAFT-19",
        ),
        Clause(
            "raft.entries.follow-up",
            SHOULD,
            _ENTRIES,
            "The client upon receiving a response with status=2 or 3 should send a follow up"
            " request message replacing previous LOG INDEX frame with the value of the LOG"
            " INDEX from the response message, retaining unique request id frame value of the"
            " previous request.",
            WIRE,
            CLIENT,
            "E-RAFT-19",
        ),
        Clause(
            "raft.entries.end-on-last",
            SHOULD,
            _ENTRIES,
            "The client upon receiving response with status=1 should end RPC with a success.",
            INTERNAL,
            CLIENT,
            "",
        ),
        Clause(
            "raft.entries.not-leader",
            SHOULD,
            _ENTRIES,
            "The client upon receiving response with status=0 should follow the broker leader"
            " state procedure.",
            WIRE,
            CLIENT,
            "E-RAFT-17",
        ),
        Clause(
            "raft.entries.stop",
            MAY,
            _ENTRIES,
            "The client may stop the peer from sending further responses (and clean up the"
            " reserved pipeline) by including 4th frame equal to 0 in the follow up request"
            " message.",
            WIRE,
            CLIENT,
            "E-RAFT-19",
        ),
        Clause(
            "raft.entries.stop-honoured",
            MUST,
            _ENTRIES,
            "4 | uint | | number of the requested log entries, may be 0 to stop server from"
            " sending any further responses in follow up messages",
            WIRE,
            PEER,
            "E-RAFT-19",
        ),
        Clause(
            "raft.entries.ignore-leader-frame",
            MUST,
            _ENTRIES,
            "3 | json | | ... in case of status=1 or 2 this frame must be ignored",
            INTERNAL,
            CLIENT,
            "E-RAFT-18",
        ),
        # ------------------------------------------------------------------
        # RequestBroadcastStateUrl
        Clause(
            "raft.broadcast.config-on-missing-url",
            SHOULD,
            _BROADCAST_URL,
            "The client, upon missing 2nd frame in the response, should perform a"
            " RequestConfig RPC ...",
            WIRE,
            CLIENT,
            "E-RAFT-21",
        ),
        Clause(
            "raft.broadcast.url-after-leader",
            SHOULD,
            _BROADCAST_URL,
            "... and only when the leader is established should perform this RPC.",
            WIRE,
            CLIENT,
            "E-RAFT-21",
        ),
        Clause(
            "raft.broadcast.subscribe",
            MAY,
            _BROADCAST_URL,
            "The client, upon receiving ZMQ PUB socket url may connect a ZMQ SUB socket to this"
            " url to start receiving StateBroadcast messages.",
            WIRE,
            CLIENT_SUBSCRIBER,
            "E-RAFT-22",
        ),
        # ------------------------------------------------------------------
        # StateBroadcast
        Clause(
            "raft.broadcast.pub-socket",
            MUST,
            _BROADCAST,
            "These messages are being fan out by the `BroadcastStateMachine`'s ZMQ PUB socket.",
            WIRE,
            PEER,
            "E-RAFT-22",
        ),
        Clause(
            "raft.broadcast.last-applied",
            MUST,
            _BROADCAST,
            "3 | uint | | LAST APPLIED INDEX ... 4 | entry | | the first entry included in this"
            " broadcast; N | entry | | the last applied entry included in this broadcast",
            WIRE,
            PEER,
            "E-RAFT-22",
        ),
        Clause(
            "raft.broadcast.heartbeat",
            SHOULD,
            _BROADCAST,
            "The `BroadcastStateMachine` should send an empty StateBroadcast message (without"
            " entries) every CLIENT_HEARTBEAT_INTERVAL (preferred: 500 ms) interval ...",
            TIMING,
            PEER,
            "E-RAFT-22",
        ),
        Clause(
            "raft.broadcast.on-apply",
            SHOULD,
            _BROADCAST,
            "... or immediately when the new entries has been applied to the state machine.",
            TIMING,
            PEER,
            "E-RAFT-22",
        ),
        # ------------------------------------------------------------------
        # Raft algorithm (from the Raft paper, not from this document)
        Clause(
            "raft.safety.election-safety",
            MUST,
            _RAFT,
            _FROM_PAPER + "Election Safety: at most one leader can be elected in a given term.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.safety.log-matching",
            MUST,
            _RAFT,
            _FROM_PAPER + "Log Matching: if two logs contain an entry with the same index and"
            " term, then the logs are identical in all entries up through the given index.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.safety.leader-completeness",
            MUST,
            _RAFT,
            _FROM_PAPER + "Leader Completeness: if a log entry is committed in a given term,"
            " then that entry will be present in the logs of the leaders for all"
            " higher-numbered terms.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.safety.state-machine-safety",
            MUST,
            _RAFT,
            _FROM_PAPER + "State Machine Safety: if a server has applied a log entry at a"
            " given index to its state machine, no other server will ever apply a different"
            " log entry for the same index.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.safety.leader-append-only",
            MUST,
            _RAFT,
            _FROM_PAPER + "Leader Append-Only: a leader never overwrites or deletes entries in its"
            " log; it only appends new entries.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.vote-once",
            MUST,
            _RAFT,
            _ALGORITHM + "(section 5.2) Each server will vote for at most one candidate in a"
            " given term, on a first-come-first-served basis.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.vote-up-to-date",
            MUST,
            _RAFT,
            _ALGORITHM + "(section 5.4.1) The voter denies its vote if its own log is more"
            " up-to-date than that of the candidate (the later last term wins; with equal last"
            " terms, the longer log).",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.persist-before-reply",
            MUST,
            _RAFT,
            _ALGORITHM + "(Figure 2) Persistent state on all servers (currentTerm, votedFor,"
            " log[]) is updated on stable storage before responding to RPCs.",
            INTERNAL,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.truncate-conflicts",
            MUST,
            _RAFT,
            _ALGORITHM + "(Figure 2, AppendEntries receiver implementation, 3) If an existing"
            " entry conflicts with a new one (same index but different terms), delete the"
            " existing entry and all that follow it.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.keep-matching-entries",
            MUST,
            _RAFT,
            _ALGORITHM + "(Figure 2, AppendEntries receiver implementation, 3 and 4) Only an existing"
            " entry that conflicts with a new one is deleted, with all that follow it; \"Append any new"
            " entries not already in the log\": an AppendEntries whose entries the log already holds"
            " (a late or repeated one) deletes nothing.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.higher-term",
            MUST,
            _RAFT,
            _ALGORITHM + "(Figure 2, Rules for Servers) If RPC request or response contains term T"
            " > currentTerm: set currentTerm = T, convert to follower.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.commit-majority",
            MUST,
            _RAFT,
            _ALGORITHM + "(section 5.3) A log entry is committed once the leader that created it"
            " has replicated it on a majority of the servers; a leader advances its commit index"
            " only over entries stored on a majority.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.commit-current-term",
            MUST,
            _RAFT,
            _ALGORITHM + "(section 5.4.2) Raft never commits log entries from previous terms by"
            " counting replicas. Only log entries from the leader's current term are committed"
            " by counting replicas.",
            WIRE,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.random-election-timeout",
            MUST,
            _RAFT,
            _ALGORITHM + "(section 5.2) Raft uses randomized election timeouts to ensure that"
            " split votes are rare and that they are resolved quickly.",
            TIMING,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.availability",
            MUST,
            _RAFT,
            _ALGORITHM + "(section 5.6) Raft will be able to elect and maintain a steady leader"
            " as long as the system satisfies the timing requirement: once the last fault has"
            " healed, a leader is elected and client requests complete within a bound.",
            TIMING,
            PEER,
            "",
        ),
        Clause(
            "raft.algorithm.leader-heartbeat",
            MUST,
            _RAFT,
            "(synthesized from the Raft paper, section 5.2, and E-RAFT-12; not from this"
            " document) A leader sends AppendEntries to every follower -- without entries"
            " when there is nothing to replicate -- often enough that no follower's election"
            " timeout elapses: at least once per ELECTION_TIMEOUT_MIN/2 while it is leader.",
            TIMING,
            PEER,
            "E-RAFT-12",
        ),
        Clause(
            "raft.kv.linearizable",
            MUST,
            _RAFT,
            "(synthesized: the guarantee Raft gives the application it replicates (Raft paper,"
            " section 8); not from this document) Every operation of the replicated key-value"
            " application appears to take effect atomically at one instant between its"
            " invocation and its completion (linearizability, Herlihy and Wing 1990): a read"
            " returns the value of the latest write before it in that order, whichever peer"
            " answers and whatever faults happen.",
            INTERNAL,
            CLIENT,
            "",
        ),
    ),
)
