"""The floor benchmark's parts measure what they say: every scheduled call runs, and the codec
part round-trips the messages it times."""

from __future__ import annotations

from bench import bench_raft_floor


def test_event_part_runs_every_scheduled_call() -> None:
    assert bench_raft_floor.event_us(n=2_000, pending=16) > 0  # asserts inside that all calls ran


def test_codec_part_times_a_real_round_trip() -> None:
    request_us, response_us = bench_raft_floor.codec_us(n=200)
    assert request_us > 0 and response_us > 0


def test_raft_load_part_counts_the_cluster_messages() -> None:
    cpu, sent = bench_raft_floor.raft_load(2, traced=False)
    assert cpu > 0
    assert sent > 100  # five peers' heartbeats and their answers alone are over 100 a second
