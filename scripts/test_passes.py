"""`make test`'s pytest: the whole suite in two passes, each on several test processes (pytest-xdist), one after
the other on the same servers:

1. the `unit` and `database` lanes, on FAST_WORKERS processes: they keep the CPUs busy, so no more than the cores;
2. the `stack`, `browser` and `faults` lanes, on STACK_WORKERS processes: they mostly wait (on Celery workers,
   daphne, Chromium, deadlines), so more processes than cores pays.

Apart because of PostgreSQL's connections (100 by default): each test process of the second pass keeps Celery
workers holding some 20 connections open for its session, and a test of the first pass opens 50 at once
(tests/test_events.py); all together they ran past 100 and that test failed. Each test process has its own test
database and Redis db (tests/support/testrun.py). The lanes: tests/support/lanes.py.

    python scripts/test_passes.py FAST_WORKERS STACK_WORKERS [PYTEST_ARG ...]

A `-m EXPR` among the pytest arguments narrows both passes; a pass left with nothing to run is not a failure
unless neither pass ran a test (pytest's exit code 5).
"""

from __future__ import annotations

import subprocess
import sys

PASSES = (("unit or database", "the unit and database lanes"), ("stack or browser or faults", "the other lanes"))
NO_TESTS = 5  # pytest's exit code when the selection holds no test
INTERRUPTED = 2  # Ctrl-C: the second pass does not start


def split_marks(args: list[str]) -> tuple[str | None, list[str]]:
    """The `-m` expression among `args` (the last, as pytest takes it) and the other arguments."""
    marks, rest = None, []
    pending = iter(args)
    for arg in pending:
        if arg == "-m":
            marks = next(pending, "")
        elif arg.startswith("-m") and not arg.startswith("--"):
            marks = arg[2:].removeprefix("=")
        else:
            rest.append(arg)
    return marks, rest


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    workers, (marks, rest) = argv[:2], split_marks(argv[2:])
    codes = []
    for number, ((lanes, title), count) in enumerate(zip(PASSES, workers, strict=True), 1):
        selection = f"({marks}) and ({lanes})" if marks else lanes
        print(f"\n=== make test, pass {number} of {len(PASSES)}: {title} ({selection}), {count} processes ===\n")
        sys.stdout.flush()
        command = [sys.executable, "-m", "pytest", "-n", count, "--dist", "worksteal", "-m", selection, *rest]
        codes.append(subprocess.call(command))
        if codes[-1] == INTERRUPTED:
            break
    if all(code == NO_TESTS for code in codes):
        return NO_TESTS
    return next((code for code in codes if code not in (0, NO_TESTS)), 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
