"""The reference Raft peer as an external process keeps its term, vote and log in its
{data_dir} (`zmq-harness node raft peer ... --data-dir DIR`): killed with SIGKILL and started
again with the same command line, it still has them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import zmq

from harness.live.supervisor import free_port
from harness.protocols import codec

BIN = Path(sys.executable).parent / "zmq-harness"
C = codec("raft", "strict")


def _start(data_dir: Path, peers: str, endpoint: str) -> subprocess.Popen:
    # A long election timeout: nothing but the test's requests changes its term.
    p = subprocess.Popen([str(BIN), "node", "raft", "peer", "--set", "id=iut", "--set", f"endpoint={endpoint}",
                          "--set", f"peers={peers}", "--set", "election_min=20s", "--set", "election_max=30s",
                          "--data-dir", str(data_dir)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = p.stdout.readline() if p.stdout else ""
    assert line.startswith("READY"), (line, p.stderr.read() if p.poll() is not None and p.stderr else "")
    return p


def _ask(sock: zmq.Socket, name: str, answer: str, fields: dict) -> dict:
    sock.send_multipart(C.encode(name, fields))
    assert sock.poll(5000), f"no answer to {name}"
    return dict(C.decode(sock.recv_multipart(), as_=answer).fields)


def _vote(ctx: zmq.Context, endpoint: str, who: str, term: int) -> dict:
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    try:
        return _ask(s, "RequestVote", "RequestVoteResponse", {"message_id": 1, "cluster": b"", "peer_id": who,
                                                              "term": term, "last_log_index": 0, "last_log_term": 0})
    finally:
        s.close()


def _vote_kill_restart_vote(first: Path, second: Path) -> tuple[dict, dict]:
    """b gets the vote of term 5; the peer is killed (SIGKILL) and started again with ``second``
    as its directory; c asks for the vote of term 5. Both answers."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    peers = f"iut={endpoint},b=tcp://127.0.0.1:{free_port()},c=tcp://127.0.0.1:{free_port()}"
    ctx = zmq.Context()
    proc = _start(first, peers, endpoint)
    try:
        before = _vote(ctx, endpoint, "b", 5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc = _start(second, peers, endpoint)
        return before, _vote(ctx, endpoint, "c", 5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        ctx.destroy(0)


@pytest.mark.live
@pytest.mark.timeout(60)
def test_a_killed_and_restarted_peer_keeps_its_term_and_vote(tmp_path: Path) -> None:
    before, after = _vote_kill_restart_vote(tmp_path / "data", tmp_path / "data")
    assert before == {"message_id": 1, "term": 5, "vote_granted": True}
    # the restarted peer voted for b in term 5: c is refused, in term 5
    assert after == {"message_id": 1, "term": 5, "vote_granted": False}
    assert os.listdir(tmp_path / "data") == ["raft-peer.store"]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(60)
def test_with_a_fresh_data_dir_a_restarted_peer_votes_again(tmp_path: Path) -> None:
    """The control: the same exchange with a fresh directory after the kill grants c the vote,
    so the first test's refusal comes from the directory, not from the exchange."""
    before, after = _vote_kill_restart_vote(tmp_path / "one", tmp_path / "two")
    assert before["vote_granted"] is True and after["vote_granted"] is True
