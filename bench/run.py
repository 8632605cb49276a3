"""Benchmark runner: `python -m bench.run [--parts ...] [--reps N]`; prints the tables of docs/performance.md.

Parts (all by default, in this order, one stack for all of them):
  critical   wall time / critical-path ideal for (2,2) (4,2) (3,3) (4,3) (5,5), with enough worker slots;
             the (5,5) runs also count what one websocket client receives
  overhead   zero-latency (5,5): wall time per task, CPU per task, events per second
  reference  the level-synchronous-4 and per-branch-2 reference schedulers at (4,3) and (5,5), against the
             engine's critical-part runs (so `reference` needs `critical` in the same run)
  scaling    (4,3) on 1, 2, 4, 8 worker processes of a few slots each (latency-bound: slots are the limit)
  snapshots  snapshot build time, size and SQL queries at 110 queries × 7 pages
  adaptive   adaptive against fixed mode at (4,3) on a "simple" and a "complex" request (bench/adaptive.py):
             model calls, cost, wall time and depth reached; the target is 30 %+ fewer calls on the simple one
             at no more than 10 % extra cost on average

Every figure is the median of the repetitions, with the 1-minute load average beside it (other work on this
machine slows the stack down; look at the load before trusting a figure). Raw runs go to var/bench/*.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.latency import ZERO, Latencies

log = logging.getLogger("bench")

PARTS = ("critical", "overhead", "reference", "scaling", "snapshots", "adaptive")
DEFAULT_PARTS = PARTS
SHAPES = ((2, 2), (4, 2), (3, 3), (4, 3), (5, 5))
OUT_DIR = Path(__file__).resolve().parent.parent / "var" / "bench"


@dataclass
class Row:
    """One line of a printed table."""

    figure: str
    value: str
    detail: str = ""
    target: str = ""
    holds: bool | None = None
    load: float | None = None


@dataclass
class Measured:
    """An engine run with what was observed around it."""

    run: Any  # bench.engine.EngineRun
    watched: Any  # bench.snapshots.Watched
    lock: Any  # bench.probes.LockSample
    load: float

    def as_dict(self) -> dict[str, Any]:
        watched = {k: v for k, v in asdict(self.watched).items() if k != "seqs"}
        watched["missing"] = sorted(set(range(1, self.run.events + 1)) - set(self.watched.seqs))[:50]
        return {
            **asdict(self.run),
            "watched": watched,
            "in_order": self.watched.in_order,
            "lock": asdict(self.lock),
            "load": self.load,
        }


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load() -> float:
    return os.getloadavg()[0]


class Bench:
    """Runs the chosen parts on one stack and keeps every raw measurement."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.latencies = Latencies(args.plan, args.search, args.page, args.analysis, args.report)
        self.raw: dict[str, Any] = {"latencies": self.latencies.as_dict(), "args": vars(args), "runs": {}}
        self.sections: list[Section] = []
        self.engine_runs: dict[tuple[int, int], list[Measured]] = {}
        self.real_5x5: str | None = None

    # --- plumbing ---

    def record(self, key: str, value: Any) -> None:
        self.raw["runs"].setdefault(key, []).append(value)

    def say(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} load {load():.2f}] {message}", file=sys.stderr, flush=True)

    def engine_run(self, stack: Any, owner: Any, breadth: int, depth: int, latencies: Latencies) -> Measured:
        """One research on the running workers, with a websocket watcher and the lock sampler attached."""
        from bench import engine
        from bench.probes import LockSampler
        from bench.snapshots import Watcher

        research_id = engine.queue_research(owner)
        with Watcher(research_id) as watcher, LockSampler(stack.database_url, stack.database_name) as sampler:
            run = engine.measure(
                research_id,
                engine.start(research_id, breadth, depth),
                breadth,
                depth,
                latencies,
                timeout=self.args.timeout,
            )
            watcher.settle(research_id)
        if run.status != "completed":
            raise RuntimeError(f"research {research_id} ({breadth},{depth}) ended {run.status}")
        if watcher.error is not None:
            raise RuntimeError(f"the websocket watcher failed: {watcher.error!r}")
        return Measured(run, watcher.result, sampler.result, load())

    # --- parts ---

    def critical(self, stack: Any, owner: Any) -> None:
        stack.fakes.prepare(self.latencies)
        for rep in range(self.args.reps):
            for breadth, depth in self.args.shapes:
                if (breadth, depth) == (5, 5) and rep >= self.args.big_reps:
                    continue  # the longest run: fewer repetitions keep a full bench near 13 minutes
                measured = self.engine_run(stack, owner, breadth, depth, self.latencies)
                run = measured.run
                self.engine_runs.setdefault((breadth, depth), []).append(measured)
                self.record(f"critical {breadth}x{depth}", measured.as_dict())
                if (breadth, depth) == (5, 5):
                    self.real_5x5 = run.research_id
                self.say(
                    f"critical rep {rep + 1} ({breadth},{depth}): {run.wall:.2f} s, ideal {run.ideal:.1f} s, "
                    f"ratio {run.ratio:.3f}, tasks waiting on the research row {measured.lock.mean_waiting:.1f}"
                )
        section = Section(
            f"Critical path ({self.args.workers} workers × {self.args.concurrency} threads; latencies "
            f"{self.latencies.describe()})"
        )
        for shape in self.args.shapes:
            measured = self.engine_runs.get(shape, [])
            runs = [m.run for m in measured]
            ratios = [r.ratio for r in runs]
            waiting = median([m.lock.mean_waiting for m in measured])
            section.rows.append(
                Row(
                    f"({shape[0]},{shape[1]}) wall / ideal",
                    f"{median(ratios):.2f}×",
                    f"{median([r.wall for r in runs]):.1f} s / {runs[0].ideal:.1f} s; range {min(ratios):.2f}–"
                    f"{max(ratios):.2f}; {runs[0].queries} queries, {runs[0].websites} pages; "
                    f"{waiting:.1f} tasks waiting on the research row",
                    "≤ 1.10× at (4,3)" if shape == (4, 3) else "",
                    median(ratios) <= 1.10 if shape == (4, 3) else None,
                    median([m.load for m in measured]),
                )
            )
        if (4, 3) in self.engine_runs:
            runs = [m.run for m in self.engine_runs[(4, 3)]]
            section.rows.append(
                Row(
                    "(4,3) last query done → first report section shown / report done",
                    f"{median([r.to_first_section for r in runs]):.2f} s / {median([r.to_report for r in runs]):.2f} s",
                    "outline, then sections in parallel (first content: the first section written)",
                )
            )
            middle = sorted((m.run for m in self.engine_runs[(4, 3)]), key=lambda r: r.wall)
            steps = " ".join(f"{k} {v:.2f}" for k, v in middle[len(middle) // 2].breakdown.items())
            section.rows.append(Row("(4,3) median run, chain that ended last (s)", "", steps))
        big = self.engine_runs.get((5, 5), [])
        if big:
            watched = [m.watched for m in big]
            section.rows.append(
                Row(
                    "(5,5) pushed to one websocket client",
                    f"{median([w.bytes for w in watched]) / 1e6:.1f} MB",
                    f"{median([w.messages for w in watched]):.0f} messages carrying "
                    f"{median([w.events for w in watched]):.0f} events; every event once and in order: "
                    f"{all(m.watched.in_order and m.watched.events == m.run.events for m in big)}",
                    load=median([m.load for m in big]),
                )
            )
        self.sections.append(section)

    def overhead(self, stack: Any, owner: Any, pool: Any) -> None:
        from bench.probes import CpuMeter

        stack.fakes.prepare(ZERO)
        observed = []
        for rep in range(self.args.overhead_reps):
            meter = CpuMeter(
                {"workers": [p.pid for p in pool.processes], "runner": [os.getpid()]},
                stack.database_url,
                stack.database_name,
            )
            meter.start()
            measured = self.engine_run(stack, owner, 5, 5, ZERO)
            cpu = meter.stop()
            observed.append((measured, cpu))
            self.record("overhead 5x5", {**measured.as_dict(), "cpu": cpu})
            self.say(f"overhead rep {rep + 1}: {measured.run.wall:.2f} s for {measured.run.tasks} tasks, cpu {cpu}")
        loads = [m.load for m, _ in observed]
        waiting = [m.lock.mean_waiting for m, _ in observed]
        busy = [m.lock.mean_busy for m, _ in observed]
        runs = [(m.run, cpu) for m, cpu in observed]
        per_task = [r.wall / r.tasks * 1000 for r, _ in runs]
        section = Section("Overhead at zero latency, (5,5)")
        section.rows += [
            Row(
                "wall time per task",
                f"{median(per_task):.1f} ms",
                f"{median([r.wall for r, _ in runs]):.1f} s for {runs[0][0].tasks} tasks "
                f"({runs[0][0].queries} queries, {runs[0][0].websites} pages)",
                "≤ 10 ms",
                median(per_task) <= 10,
                median(loads),
            ),
            Row(
                "CPU per task",
                f"{median([c['workers'] / r.tasks * 1000 for r, c in runs]):.1f} ms workers",
                f"+ {median([c['postgres'] / r.tasks * 1000 for r, c in runs]):.1f} ms PostgreSQL (at least), "
                f"+ {median([c['runner'] / r.tasks * 1000 for r, c in runs]):.1f} ms fakes and runner",
            ),
            Row(
                "database commits per task",
                f"{median([c['commits'] / r.tasks for r, c in runs]):.1f}",
                f"{median([c['sessions'] for _, c in runs]):.0f} new database sessions per research",
            ),
            Row(
                "events recorded per second",
                f"{median([r.events / r.wall for r, _ in runs]):.0f}/s",
                f"{runs[0][0].events} events per research",
            ),
            Row(
                "tasks waiting on the research row",
                f"{median(waiting):.1f}",
                f"of {median(busy):.1f} busy backends on average",
            ),
        ]
        self.sections.append(section)

    def reference(self, stack: Any) -> None:
        from bench import reference

        if not self.engine_runs:
            raise SystemExit("the reference part compares with the critical part: run both")
        query = self.latencies.search + self.latencies.page + self.latencies.analysis
        section = Section("Against reference schedulers (same fakes, same latencies)")
        targets = {
            ("level-synchronous-4", (4, 3)): 1.5,
            ("per-branch-2", (4, 3)): 3.0,
            ("level-synchronous-4", (5, 5)): 4.0,
            ("per-branch-2", (5, 5)): 8.0,
        }
        for shape in [s for s in ((4, 3), (5, 5)) if s in self.engine_runs]:
            ours = median([m.run.wall for m in self.engine_runs[shape]])
            for name, scheduler in reference.SCHEDULERS.items():
                walls, loads = [], []
                for _ in range(self.args.ref_reps):
                    stack.fakes.prepare(self.latencies)
                    run = scheduler(reference.Calls(stack.fakes.llm.url, stack.fakes.searx.url), *shape)
                    walls.append(run.wall)
                    loads.append(load())
                    self.record(f"reference {name} {shape[0]}x{shape[1]}", {**asdict(run), "load": loads[-1]})
                    self.say(f"reference {name} {shape}: {run.wall:.2f} s")
                model = reference.model_time(name, *shape, self.latencies.plan, query, self.latencies.report)
                ideal = self.engine_runs[shape][0].run.ideal
                target = targets[(name, shape)]
                speedup = median(walls) / ours
                section.rows.append(
                    Row(
                        f"({shape[0]},{shape[1]}) vs {name}",
                        f"{speedup:.2f}× faster",
                        f"it {median(walls):.1f} s (pure latencies {model:.1f} s), engine {ours:.1f} s; "
                        f"at most {model / ideal:.2f}× for a scheduler at the ideal {ideal:.1f} s",
                        f"≥ {target:g}×",
                        speedup >= target,
                        median(loads),
                    )
                )
        self.sections.append(section)

    def scaling(self, stack: Any, owner: Any) -> None:
        stack.fakes.prepare(self.latencies)
        walls: dict[int, list[float]] = {}
        loads: dict[int, list[float]] = {}
        for count in self.args.scaling_workers:
            with stack.workers(count, self.args.scaling_concurrency, f"bench-s{count}-"):
                for rep in range(self.args.scaling_reps):
                    measured = self.engine_run(stack, owner, 4, 3, self.latencies)
                    walls.setdefault(count, []).append(measured.run.wall)
                    loads.setdefault(count, []).append(measured.load)
                    self.record(f"scaling {count}", measured.as_dict())
                    self.say(f"scaling {count} workers rep {rep + 1}: {measured.run.wall:.2f} s")
        base = median(walls[self.args.scaling_workers[0]])
        last = self.raw["runs"][f"scaling {self.args.scaling_workers[0]}"][-1]
        lat = self.latencies
        plans = last["tasks"] - 3 - last["queries"] - 2 * last["websites"] + 1
        # Slot-seconds of latency the tree needs, report aside (it runs alone at the end): no scheduler on
        # `slots` slots can finish before work / slots + report, nor before the critical path.
        work = plans * lat.plan + last["queries"] * lat.search + last["websites"] * (lat.page + lat.analysis)
        section = Section(
            f"Worker scaling, (4,3), workers of {self.args.scaling_concurrency} threads each "
            f"(speed-up over {self.args.scaling_workers[0]})"
        )
        for count in self.args.scaling_workers:
            speedup = base / median(walls[count])
            slots = count * self.args.scaling_concurrency
            bound = max(last["ideal"], work / slots + lat.report)
            first = max(
                last["ideal"], work / (self.args.scaling_workers[0] * self.args.scaling_concurrency) + lat.report
            )
            section.rows.append(
                Row(
                    f"{count} worker{'s' if count > 1 else ''}",
                    f"{speedup:.2f}×",
                    f"{median(walls[count]):.1f} s; no scheduler under {bound:.1f} s on {slots} slots "
                    f"(best speed-up {first / bound:.2f}×)",
                    "≥ 3.5× at 4" if count == 4 else "",
                    speedup >= 3.5 if count == 4 else None,
                    median(loads[count]),
                )
            )
        self.sections.append(section)

    def adaptive(self, stack: Any, owner: Any) -> None:
        from bench.adaptive import MODES, REQUESTS, run_one, verdict

        shape = (4, 3)
        runs: dict[tuple[str, str], list[Any]] = {}
        with stack.workers(self.args.workers, self.args.concurrency, "bench-adaptive-"):
            for rep in range(self.args.adaptive_reps):
                for request in REQUESTS:
                    for mode in MODES:
                        run = run_one(stack, owner, self.latencies, request, mode, shape, self.args.timeout)
                        if run.status != "completed":
                            raise RuntimeError(f"adaptive bench: {request} {mode} ended {run.status}")
                        runs.setdefault((request, mode), []).append(run)
                        self.record(f"adaptive {request} {mode}", run.as_dict())
                        self.say(
                            f"adaptive rep {rep + 1} {request} {mode}: {run.wall:.1f} s, {run.calls} calls, "
                            f"${run.cost_usd:.4f}, depth {run.depth_reached}"
                        )
        section = Section(f"Adaptive against fixed mode, (4,3), latencies {self.latencies.describe()}")
        for (request, mode), measured in runs.items():
            section.rows.append(
                Row(
                    f"{request}, {mode}",
                    f"{median([r.calls for r in measured]):.0f} calls",
                    f"${median([r.cost_usd for r in measured]):.4f}; {median([r.tokens for r in measured]):,.0f} "
                    f"tokens; {median([r.wall for r in measured]):.1f} s; {measured[0].queries} queries, depth "
                    f"{measured[0].depth_reached}, {measured[0].gap_rounds} gap rounds",
                )
            )
        saved, extra = verdict(runs, median)
        section.rows.append(
            Row("simple request: calls saved by adaptive", f"{saved:.0%}", "", "≥ 30 %", saved >= 0.30, load())
        )
        section.rows.append(
            Row(
                "extra cost of adaptive, mean of both requests",
                f"{extra:+.0%}",
                "",
                "≤ +10 %",
                extra <= 0.10,
                load(),
            )
        )
        self.sections.append(section)

    def snapshots(self, owner: Any) -> None:
        from bench.snapshots import build_tree, measure_snapshot

        section = Section("Snapshots (research/snapshot.py build_snapshot)")
        small = measure_snapshot("built (2,2) × 7", build_tree(owner, 2, 2))
        big = measure_snapshot("built (5,5) × 7", build_tree(owner, 5, 5))
        figures = [small, big]
        if self.real_5x5:
            figures.append(measure_snapshot("engine's (5,5) research", self.real_5x5))
        for fig in figures:
            at_size = fig.queries == 110
            section.rows.append(
                Row(
                    f"{fig.label}: {fig.queries} queries, {fig.websites} pages",
                    f"{fig.build_ms:.1f} ms",
                    f"{fig.json_bytes / 1000:.0f} KB JSON, {fig.sql_queries} SQL queries",
                    "≤ 50 ms, constant queries" if at_size else "",
                    (fig.build_ms <= 50 and fig.sql_queries == small.sql_queries) if at_size else None,
                    load(),
                )
            )
            self.record("snapshot", {**asdict(fig), "load": load()})
        self.sections.append(section)

    # --- all of it ---

    def run(self) -> None:
        from bench import engine
        from bench.stack import Stack

        parts = self.args.parts
        with Stack() as stack:
            self.say(f"stack ready: database {stack.database_name}, redis {stack.redis_url}")
            owner = engine.create_user()
            if {"critical", "overhead", "reference"} & set(parts):
                with stack.workers(self.args.workers, self.args.concurrency, "bench-main-") as pool:
                    if "critical" in parts or "reference" in parts:
                        self.critical(stack, owner)
                    if "overhead" in parts:
                        self.overhead(stack, owner, pool)
            if "reference" in parts:
                self.reference(stack)
            if "scaling" in parts:
                self.scaling(stack, owner)
            if "snapshots" in parts:
                self.snapshots(owner)
            if "adaptive" in parts:
                self.adaptive(stack, owner)

    def table(self) -> str:
        lines = []
        for section in self.sections:
            lines += ["", f"## {section.title}", "", "| figure | value | detail | target | holds | load |"]
            lines.append("|---|---|---|---|---|---|")
            for row in section.rows:
                holds = "" if row.holds is None else ("yes" if row.holds else "**no**")
                shown_load = "" if row.load is None else f"{row.load:.1f}"
                lines.append(f"| {row.figure} | {row.value} | {row.detail} | {row.target} | {holds} | {shown_load} |")
        return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    add: Callable[..., Any] = parser.add_argument
    add("--parts", nargs="+", choices=PARTS, default=list(DEFAULT_PARTS), help="parts to run (default: all)")
    add("--reps", type=int, default=3, help="repetitions of each critical-path shape (default 3)")
    add("--big-reps", type=int, default=2, help="repetitions of the (5,5) critical-path run (default 2)")
    add("--ref-reps", type=int, default=1, help="repetitions of each reference run (default 1: they are sleeps)")
    add("--overhead-reps", type=int, default=2, help="repetitions of the zero-latency run (default 2)")
    add("--scaling-reps", type=int, default=1, help="repetitions per worker count (default 1)")
    add("--workers", type=int, default=4, help="worker processes for critical/overhead (default 4)")
    add("--concurrency", type=int, default=16, help="threads per worker for critical/overhead (default 16)")
    add("--scaling-workers", type=int, nargs="+", default=[1, 2, 4, 8], help="worker counts (default 1 2 4 8)")
    add("--scaling-concurrency", type=int, default=2, help="threads per worker when scaling (default 2)")
    add("--shapes", type=_shape, nargs="+", default=list(SHAPES), help="critical-path shapes, e.g. 4x3 5x5")
    add("--adaptive-reps", type=int, default=1, help="repetitions of each adaptive-bench run (default 1)")
    add("--timeout", type=float, default=900, help="seconds one research may take (default 900)")
    defaults = Latencies()
    for name in ("plan", "search", "page", "analysis", "report"):
        add(f"--{name}", type=float, default=getattr(defaults, name), help=f"{name} latency, s")
    add("--json", type=Path, default=None, help="where to write the raw runs (default var/bench/bench-<time>.json)")
    return parser.parse_args(argv)


def _shape(text: str) -> tuple[int, int]:
    breadth, _, depth = text.partition("x")
    return int(breadth), int(depth)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING)
    bench = Bench(args)
    began = time.monotonic()
    try:
        bench.run()
    finally:
        bench.raw["seconds"] = time.monotonic() - began
        bench.raw["sections"] = [asdict(s) for s in bench.sections]
        path = args.json or OUT_DIR / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(bench.raw, indent=1, default=str))
        print(bench.table())
        print(f"\n{time.monotonic() - began:.0f} s in all; raw runs in {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
