"""The bounded exchange of a conformance case (harness/conformance/exchange_log.py)."""

from __future__ import annotations

from harness.conformance.exchange_log import GAP, ExchangeLog


def entry(t: float, direction: str = "in", message: str = "PONG") -> dict[str, object]:
    return {"t_ms": t, "dir": direction, "peer": "worker.a", "message": message}


def test_a_short_exchange_is_kept_whole_and_unmarked() -> None:
    log = ExchangeLog(head=3, tail=2, sends=2)
    for t in range(5):
        log.append(entry(t))
    assert [e["t_ms"] for e in log.entries()] == [0, 1, 2, 3, 4]
    assert log.dropped == 0


def test_a_long_one_keeps_head_tail_and_the_harness_sends_with_a_marker() -> None:
    log = ExchangeLog(head=3, tail=2, sends=2)
    for t in range(20):
        log.append(entry(t, "out" if t in (5, 7, 9) else "in", "REQUEST" if t in (5, 7, 9) else "PONG"))
    got = log.entries()
    assert [e["t_ms"] for e in got if e["dir"] != GAP] == [0, 1, 2, 5, 7, 18, 19]  # the third send: over `sends`
    [gap] = [e for e in got if e["dir"] == GAP]
    assert got.index(gap) == 3
    assert gap["fields"]["messages"] == 20 - 7 and (gap["fields"]["from_ms"], gap["fields"]["to_ms"]) == (3, 17)
    assert len(log) == 7


def test_last_reads_the_newest_entries_first_to_last() -> None:
    log = ExchangeLog(head=2, tail=3, sends=0)
    for t in range(10):
        log.append(entry(t, message="PING" if t % 2 else "PONG"))
    assert [e["t_ms"] for e in log.last(2, lambda e: e["message"] == "PONG")] == [0, 8]
    assert [e["t_ms"] for e in log.last(5, lambda e: e["message"] == "PING")] == [1, 7, 9]
