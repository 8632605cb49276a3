"""The bench's bound on a run's wall time: no scheduler on a number of worker slots finishes a tree sooner than
its critical path or its work spread over the slots, and a report sooner than its outline and its sections, as
many at a time as there are slots; and the tighter least time (`tree_bound`), where the tree's calls cannot start
before the chains ahead of them, against a schedule of the same calls."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.engine import (
    EngineRun,
    ideal_time,
    latency_work,
    report_time,
    scheduled_time,
    slot_bound,
    tree_bound,
    tree_of,
)
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


def _tree_run(sections: int) -> EngineRun:
    """Two top queries of 3 pages (one failed), each with two children of 2 pages: a (2,2)-like tree."""
    queries = [{"id": 1, "parent_id": None}, {"id": 2, "parent_id": None}]
    queries += [{"id": 10 * parent + k, "parent_id": parent} for parent in (1, 2) for k in (1, 2)]
    websites = [{"query_id": q, "status": "analyzed"} for q in (1, 2) for _ in range(2)]
    websites += [{"query_id": q, "status": "failed"} for q in (1, 2)]
    websites += [{"query_id": q["id"], "status": "analyzed"} for q in queries[2:] for _ in range(2)]
    ideal = ideal_time(queries, websites, LATENCIES)
    tasks = 1 + 1 + 2 + len(queries) + 2 * len(websites) + 1
    tree = tree_of(queries, websites)
    return EngineRun(
        2, 2, "r", "completed", 20.0, ideal, len(queries), len(websites), 12, 0, tasks, sections, {}, tree=tree
    )


def test_a_schedule_on_enough_slots_takes_the_critical_path() -> None:
    run = _tree_run(sections=0)
    # plan 1, search 0.3, page 1.2, then the children's plan 1, search 0.3, page 1.2, then the report 2
    assert run.ideal == pytest.approx(7.0)
    assert scheduled_time(run, LATENCIES, slots=100) == pytest.approx(run.ideal)
    assert scheduled_time(run, LATENCIES, slots=100) >= slot_bound(run, LATENCIES, slots=100) - 1e-9


def test_a_schedule_on_one_slot_does_all_the_work_in_turn() -> None:
    run = _tree_run(sections=4)
    work = latency_work(run, LATENCIES)
    assert work == pytest.approx(3 * 1.0 + 6 * 0.3 + 12 * 1.2 + 2 * 0.2)
    # one slot: every call in turn, then the outline and the four sections one by one
    assert scheduled_time(run, LATENCIES, slots=1) == pytest.approx(work + 5 * LATENCIES.report_part)
    assert scheduled_time(run, LATENCIES, slots=1) == pytest.approx(slot_bound(run, LATENCIES, slots=1))


def test_a_schedule_on_few_slots_is_held_by_the_trees_shape() -> None:
    # three slots: the top planning and the two searches leave two and one slots idle; no schedule fills them
    run = _tree_run(sections=0)
    scheduled = scheduled_time(run, LATENCIES, slots=3)
    assert scheduled > slot_bound(run, LATENCIES, slots=3)
    assert scheduled < scheduled_time(run, LATENCIES, slots=1)


def test_a_run_without_its_tree_has_no_schedule() -> None:
    bare = _run(ideal=9.5, queries=20, websites=140, inner=12, sections=0)
    assert math.isnan(scheduled_time(bare, LATENCIES, 8))
    assert math.isnan(tree_bound(bare, LATENCIES, 8))


def _shaped_run(breadth: int, depth: int, sections: int) -> EngineRun:
    """The tree the engine builds for (breadth, depth) when every query finds seven pages and every page is
    analysed: each level's queries ask half as many children, rounded up, as their parents."""
    queries: list[dict[str, int | None]] = []

    def ask(parent: int | None, width: int, levels: int) -> None:
        for _ in range(width):
            queries.append({"id": len(queries) + 1, "parent_id": parent})
            if levels > 1:
                ask(len(queries), math.ceil(width / 2), levels - 1)

    ask(None, breadth, depth)
    websites = [{"query_id": q["id"], "status": "analyzed"} for q in queries for _ in range(7)]
    tasks = 1 + 1 + len({q["parent_id"] for q in queries} - {None}) + len(queries) + 2 * len(websites) + 1
    return EngineRun(
        breadth,
        depth,
        "r",
        "completed",
        30.0,
        ideal_time(queries, websites, LATENCIES),
        len(queries),
        len(websites),
        len(websites),
        0,
        tasks,
        sections,
        {},
        tree=tree_of(queries, websites),
    )


def test_a_five_by_five_on_64_slots_cannot_reach_its_work_over_the_slots() -> None:
    run = _shaped_run(5, 5, sections=385)
    assert (run.queries, run.websites, run.tasks) == (110, 770, 1733)
    assert slot_bound(run, LATENCIES, 64) == pytest.approx(1038 / 64 + 8.0)  # the work over the slots, the report
    least = tree_bound(run, LATENCIES, 64)
    # Level 1 opens 5 queries of 7 pages: 35 of the 64 slots while its pages run; the deep levels wait on chains.
    # Every window of the run holds more of the work than its share, so no schedule reaches 24.2 s.
    assert least == pytest.approx(27.33, abs=0.01)
    assert least <= scheduled_time(run, LATENCIES, 64) == pytest.approx(28.9)


def test_a_four_by_three_on_64_slots_is_held_by_its_critical_path_alone() -> None:
    run = _shaped_run(4, 3, sections=70)
    assert tree_bound(run, LATENCIES, 64) == pytest.approx(slot_bound(run, LATENCIES, 64)) == pytest.approx(10.5)


@st.composite
def _random_runs(draw: st.DrawFn) -> EngineRun:
    """A tree of up to 40 queries, each with up to 9 pages analysed and 3 failed, under a random parent."""
    count = draw(st.integers(1, 40))
    queries: list[dict[str, int | None]] = []
    websites: list[dict[str, object]] = []
    for number in range(1, count + 1):
        parent = draw(st.none() | st.integers(1, number - 1)) if number > 1 else None
        queries.append({"id": number, "parent_id": parent})
        websites += [{"query_id": number, "status": "analyzed"}] * draw(st.integers(0, 9))
        websites += [{"query_id": number, "status": "failed"}] * draw(st.integers(0, 3))
    analysed = sum(1 for w in websites if w["status"] == "analyzed")
    tasks = 1 + 1 + len({q["parent_id"] for q in queries} - {None}) + count + 2 * len(websites) + 1
    return EngineRun(
        1,
        1,
        "r",
        "completed",
        10.0,
        ideal_time(queries, websites, LATENCIES),
        count,
        len(websites),
        analysed,
        0,
        tasks,
        draw(st.integers(0, 90)),
        {},
        tree=tree_of(queries, websites),
    )


@settings(max_examples=150, deadline=None)
@given(run=_random_runs(), slots=st.integers(1, 80))
def test_the_least_time_lies_between_the_simple_bound_and_a_schedule(run: EngineRun, slots: int) -> None:
    least = tree_bound(run, LATENCIES, slots)
    # at least max(critical path, work / slots): the windows include the whole run and each chain
    assert least >= slot_bound(run, LATENCIES, slots) - 1e-9
    # at most what a real schedule of the same calls achieves, since it is a bound on every schedule
    assert least <= scheduled_time(run, LATENCIES, slots) + 1e-9
