"""Captures: reading ZeroMQ traffic from pcap/pcapng files, and recording it.

From the wire up:

* `pcapfile` — TCP segments out of a capture file, streamed (scapy's RawPcapReader);
* `tcp` — TCP reassembly: each connection's two byte streams, gaps named;
* `zmtp` — ZMTP 3.x read incrementally from one direction of a stream;
* `streams` — ZMTP connections ("links") and their messages, subscriptions and problems;
* `nodes` — endpoints grouped into nodes, and their roles;
* `wire` — messages decoded as their receiver would, and tallied against the clauses;
* `convert` — `check_pcap`: a capture to a trace and verdicts (`zmq-harness pcap`);
* `layers` — scapy layers for ZMTP and the five protocols;
* `sniff`, `bpf` — recording loopback traffic (`zmq-harness run --live --capture`).

docs/captures.md says how to use them.
"""
