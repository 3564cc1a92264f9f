"""The server-floor benchmark: an empty answer from the production server's settings, timed both ways, and
the backend's figures set against it."""

from __future__ import annotations

from benchmarks import server_floor


def test_the_empty_answer_server_is_timed_back_to_back_and_paced() -> None:
    floor = server_floor.measure(requests=30, paced_requests=3)
    assert len(floor.back_to_back) == 30 and len(floor.paced) == 3
    assert all(0 < latency < 5 for latency in floor.back_to_back + floor.paced)
    lines = floor.lines()
    assert "back to back: n=30" in lines[0] and "50 per second: n=3" in lines[1]


def test_a_figure_is_set_against_the_floor_as_a_ratio_and_the_time_added() -> None:
    line = server_floor.beside("should-assign-work (false)", [0.003] * 98 + [0.009] * 2, [0.001] * 100)
    assert line == (
        "should-assign-work (false) against the empty answer: "
        "p50 3.00 / 1.00 ms = 3.00x (+2.00 ms); p99 9.00 / 1.00 ms = 9.00x (+8.00 ms)"
    )
