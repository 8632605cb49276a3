"""The bench's bound on a run's wall time: no scheduler on a number of worker slots finishes a tree sooner than
its critical path or its work spread over the slots, and a report sooner than its outline and its sections, as
many at a time as there are slots."""

import pytest

from bench.engine import EngineRun, latency_work, report_time, slot_bound
from bench.latency import Latencies

LATENCIES = Latencies()  # plan 1 s, search 0.3 s, page 0.2 s, analysis 1 s, report 2 s


def _run(*, ideal: float, queries: int, websites: int, inner: int, sections: int) -> EngineRun:
    tasks = 1 + 1 + inner + queries + 2 * websites + 1  # bench.engine.task_count
    return EngineRun(4, 3, "r", "completed", 20.0, ideal, queries, websites, websites, 0, tasks, sections, {})


def test_a_report_with_more_sections_than_slots_takes_more_rounds() -> None:
    four_three = _run(ideal=9.5, queries=20, websites=140, inner=12, sections=70)
    assert report_time(four_three, LATENCIES, slots=70) == pytest.approx(2.0)
    assert report_time(four_three, LATENCIES, slots=64) == pytest.approx(3.0)
    assert report_time(four_three, LATENCIES, slots=2) == pytest.approx(1.0 + 35 * 1.0)
    # The tree's critical path (9.5 s less the report) bounds 64 slots; its work bounds 2.
    assert slot_bound(four_three, LATENCIES, slots=64) == pytest.approx(7.5 + 3.0)
    work = latency_work(four_three, LATENCIES)
    assert work == pytest.approx(13 * 1.0 + 20 * 0.3 + 140 * 1.2)
    assert slot_bound(four_three, LATENCIES, slots=2) == pytest.approx(work / 2 + 36.0)


def test_a_report_without_sections_takes_the_report_latency() -> None:
    whole = _run(ideal=9.5, queries=20, websites=140, inner=12, sections=0)
    assert report_time(whole, LATENCIES, slots=1) == pytest.approx(LATENCIES.report)
    assert slot_bound(whole, LATENCIES, slots=1000) == pytest.approx(9.5)
