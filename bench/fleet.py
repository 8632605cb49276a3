"""On paper: what a fleet needs for N researches at once, from the per-task costs of a bench run.

`python -m bench.fleet var/bench/bench-<time>.json [more.json ...] [--researches 1000] [--slower 1 10]`
reads the raw runs `python -m bench.run` wrote (later files fill in what earlier ones lack; a full run has all of
them) and prints the table docs/scaling.md explains. Each research is the `many` part's shape, running at the pace
it ran alone on the bench (`--slower k`: every external call k times the bench's latency, so the research takes k
times as long and issues its tasks k times more slowly). Every figure names the bench row it comes from.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def load_runs(paths: Sequence[Path]) -> tuple[dict[str, list[Any]], dict[str, float]]:
    runs: dict[str, list[Any]] = {}
    latencies: dict[str, float] = {}
    for path in paths:
        raw = json.loads(path.read_text())
        runs.update(raw["runs"])
        latencies = latencies or raw["latencies"]
    return runs, latencies


def estimate(runs: dict[str, list[Any]], lat: dict[str, float], researches: int, slower: float) -> list[tuple]:
    solo = runs["many solo"][-1]
    overhead = runs["overhead 5x5"]
    per_task = {
        key: statistics.median(r["cpu"][key] / r["tasks"] for r in overhead)
        for key in ("workers", "postgres", "runner", "commits", "sql", "redis", "runner_redis")
    }
    tasks, wall = solo["tasks"], solo["wall"] * slower
    plans = tasks - 3 - solo["queries"] - 2 * solo["websites"] + 1
    slot_seconds = slower * (
        plans * lat["plan"]
        + solo["queries"] * lat["search"]
        + solo["websites"] * (lat["page"] + lat["analysis"])
        + lat["report"]
    )
    rate = researches * tasks / wall
    slots = researches * slot_seconds / wall
    ws_bytes = solo["watched"]["bytes"]
    ws_ratio = ws_bytes / solo["snapshot_bytes"]
    delta_ms = max((d["build_ms"] for d in runs.get("delta", [])), default=float("nan"))
    shape = f"({solo['breadth']},{solo['depth']})"
    src_many = "Many: one research alone"
    return [
        ("research", f"{shape}: {tasks} tasks, {solo['events']} events, {wall:.1f} s", src_many),
        ("tasks per second", f"{rate:,.0f}", f"{researches} × tasks / time alone ({src_many})"),
        ("worker slots busy (threads)", f"{slots:,.0f}", "latency-seconds of the tree / time alone"),
        ("PostgreSQL connections today (one per thread)", f"{slots:,.0f}", "Many: PostgreSQL connections"),
        (
            "worker cores",
            f"{rate * per_task['workers']:,.0f}",
            f"{per_task['workers'] * 1000:.1f} ms per task (Overhead: CPU per task, all processes)",
        ),
        (
            "PostgreSQL cores (at least)",
            f"{rate * per_task['postgres']:,.0f}",
            f"{per_task['postgres'] * 1000:.1f} ms per task (Overhead: CPU per task, all processes)",
        ),
        (
            "PostgreSQL backends busy at once with a pool (at least)",
            f"{rate * per_task['postgres']:,.0f}",
            "tasks/s × PostgreSQL CPU per task (Little's law, CPU time only)",
        ),
        (
            "commits per second",
            f"{rate * per_task['commits']:,.0f}",
            f"{per_task['commits']:.1f} per task (Overhead: database commits per task)",
        ),
        (
            "SQL statements per second",
            f"{rate * per_task['sql']:,.0f}",
            f"{per_task['sql']:.1f} per task (Overhead: SQL statements per task)",
        ),
        (
            "Redis commands per second, workers",
            f"{rate * per_task['redis']:,.0f}",
            f"{per_task['redis']:.1f} per task (Overhead: Redis commands per task)",
        ),
        (
            "Redis commands per second, one watching client each",
            f"{rate * per_task['runner_redis']:,.0f}",
            f"{per_task['runner_redis']:.2f} per task (Overhead: Redis commands per task, detail)",
        ),
        (
            "events written per second",
            f"{researches * solo['events'] / wall:,.0f}",
            f"{solo['events']} events per research ({src_many})",
        ),
        (
            "websocket bytes per second, one client each",
            # Deltas: a research sends what changed, so its bytes follow its rows, not the number of its pushes.
            f"{researches * ws_bytes / wall / 1e6:,.1f} MB/s",
            f"{ws_bytes / 1e6:.2f} MB to one client over the {shape}, {ws_ratio:.1f}× its final snapshot ({src_many}"
            "; Critical: (4,3) pushed to one websocket client / final snapshot is the same measure at (4,3))",
        ),
        (
            "pusher cores (at most one push a second per research)",
            f"{researches * delta_ms / 1000:,.1f}",
            f"{delta_ms:.1f} ms per push of one event at 110 × 7 (Snapshots and deltas: delta of one event); a "
            "push of a busy second carries more rows",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="+", help="raw runs of python -m bench.run (var/bench/*.json)")
    parser.add_argument("--researches", type=int, default=1000, help="researches at once (default 1000)")
    parser.add_argument("--slower", type=float, nargs="+", default=[1.0, 10.0], help="latency multiples (1 10)")
    args = parser.parse_args(argv)
    runs, lat = load_runs(args.paths)
    columns = [estimate(runs, lat, args.researches, k) for k in args.slower]
    head = " | ".join(f"latencies × {k:g}" for k in args.slower)
    print(f"| {args.researches:,} researches at once | {head} | from |")
    print("|---|" + "---|" * len(args.slower) + "---|")
    for i, (name, _, source) in enumerate(columns[0]):
        print(f"| {name} | " + " | ".join(column[i][1] for column in columns) + f" | {source} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
