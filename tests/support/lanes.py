"""The test lanes: each test is marked with one, from what it uses (tests/conftest.py applies them; pyproject.toml
registers them; README.md lists them under `make test-fast`).

- `browser`: a test under tests/browser/ (Chromium against the real stack).
- `faults`: a test of a fault-injection module, or one that kills a process of the stack or restarts a service.
- `stack`: a test that starts real processes (Celery workers, daphne, celery beat, a private Redis or PostgreSQL,
  `make demo`'s script) through its fixtures or its own code.
- `database`: a test of the test database (the `django_db` mark or a database fixture), without those processes.
- `unit`: the rest (the loopback fakes, this run's Redis, a short subprocess at most).

The first that applies wins. A fixture or test "starts processes" when its code, or the code of a helper of tests/
it calls, names one of PROCESS_CLASSES (or a subclass) or one of PROCESS_SCRIPTS: found by reading the compiled
code's names and strings, so a new test on the stack is put in its lane without anyone marking it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType

import pytest

from devtools.servers import DaphneServer, WorkerPool
from tests.support.private_services import Beat, PrivatePostgres, PrivateRedis

LANES = ("unit", "database", "stack", "browser", "faults")
TESTS = Path(__file__).resolve().parent.parent
BROWSER = TESTS / "browser"
PROCESS_CLASSES: tuple[type, ...] = (WorkerPool, DaphneServer, Beat, PrivateRedis, PrivatePostgres)
PROCESS_SCRIPTS = frozenset({"scripts/demo.py"})  # run as a subprocess, it starts daphne, a worker and beat
# Whole modules of fault injection (test_limits.py: servers that hang or trickle, rows locked for long, each test
# waiting out a deadline); tests elsewhere join the lane by calling one of FAULT_CALLS.
FAULT_MODULES = frozenset({"test_faults.py", "test_daphne_restart.py", "test_limits.py", "test_partitions.py"})
FAULT_CALLS = frozenset({"kill", "restart"})  # WorkerPool.kill, PrivatePostgres.restart, a daphne's restart
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}
)


def lane_of(item: pytest.Item) -> str:
    path = Path(str(item.path))
    if BROWSER in path.parents:
        return "browser"
    test_names, test_starts = uses(getattr(item, "function", None))
    starts = test_starts or any(uses(function)[1] for function in fixture_functions(item))
    if path.name in FAULT_MODULES or (starts and test_names & FAULT_CALLS):
        return "faults"
    if starts:
        return "stack"
    if item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "database"
    return "unit"


def fixture_functions(item: pytest.Item) -> Iterator[Callable[..., object]]:
    """The functions of the fixtures the test uses, directly or through other fixtures, that tests/ defines."""
    info = getattr(item, "_fixtureinfo", None)
    for definitions in info.name2fixturedefs.values() if info else ():
        for definition in definitions:
            if is_ours(definition.func):
                yield definition.func


_USES: dict[Callable[..., object], tuple[frozenset[str], bool]] = {}


def uses(function: Callable[..., object] | None) -> tuple[frozenset[str], bool]:
    """The names the function's code uses (globals and attributes) through nested code and the helpers of tests/ it
    calls, and whether any of them is a class that starts a process (or a string names a script that does)."""
    if function is None:
        return frozenset(), False
    function = inspect.unwrap(function)
    if function not in _USES:
        names: set[str] = set()
        starts = False
        seen: set[CodeType] = set()
        pending = [function]
        while pending:
            current = pending.pop()
            namespace = getattr(current, "__globals__", {})
            for code in codes(current.__code__):
                if code in seen:
                    continue
                seen.add(code)
                starts = starts or any(const in PROCESS_SCRIPTS for const in code.co_consts if isinstance(const, str))
                for name in code.co_names:
                    names.add(name)
                    value = namespace.get(name)
                    if isinstance(value, type) and issubclass(value, PROCESS_CLASSES):
                        starts = True
                    elif inspect.isfunction(value) and is_ours(value):
                        pending.append(value)
        _USES[function] = (frozenset(names), starts)
    return _USES[function]


def codes(code: CodeType) -> Iterator[CodeType]:
    """A code object and those nested in it (inner functions, lambdas, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from codes(const)


def is_ours(function: Callable[..., object]) -> bool:
    """A function of tests/ (a test module, a conftest, tests/support), with code to read."""
    return (getattr(function, "__module__", None) or "").split(".")[0] == "tests" and hasattr(function, "__code__")
