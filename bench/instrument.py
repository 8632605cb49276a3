"""Counters of what a process sends to PostgreSQL and Redis: SQL statements and Redis commands.

The bench's worker processes import this module at start (`CELERY_IMPORTS=bench.instrument`, a setting that is
empty in production) and write their running totals every quarter of a second to `<BENCH_COUNTS_DIR>/<pid>.json`;
the runner reads the files of its workers before and after a run (`read`). Counted:

- SQL: every statement Django sends (`connection.execute_wrappers`, installed on each new connection by the
  `connection_created` signal): queries, inserts, updates, savepoints; an `executemany` counts one per parameter
  set. Not counted: the BEGIN psycopg sends before a transaction's first statement and the COMMIT or ROLLBACK
  that ends it (the bench counts commits from `pg_stat_database`).
- Celery tasks: every task a worker starts (the `task_prerun` signal), duplicates and retries included.
- Redis: every command redis-py packs for the server, synchronous (kombu's broker, the push locks and sequence
  keys, the rate limiters) and asynchronous (channels_redis's group sends), pipelines counted per command. Idle
  workers poll their queues (BRPOP with a timeout of a second), which counts too.

The cost is one Python call, a dictionary look-up and a lock per statement or command.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

_lock = threading.Lock()
counts = {"sql": 0, "redis": 0, "tasks": 0}
# SQL statements by verb and first table ("UPDATE research_website"), Redis commands by name ("redis EVALSHA").
kinds: Counter[str] = Counter()
_TABLE = re.compile(r'(?:FROM|INTO|UPDATE|JOIN)\s+"?(\w+)', re.IGNORECASE)


def _count_statements(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    n = 1
    if many:
        try:
            n = len(params)
        except TypeError:
            pass
    kind = _kinds.get(sql)
    if kind is None:
        kind = _kinds[sql] = _kind(sql)
    with _lock:
        counts["sql"] += n
        kinds[kind] += n
    return execute(sql, params, many, context)


# A statement's kind by its text: Django sends the same few hundred texts again and again, and the regex over a
# long statement cost more than the count (2 % of a worker's CPU in a profile) before this cache. Bounded by the
# number of distinct statement texts, which parameters do not change.
_kinds: dict[str, str] = {}


def _kind(sql: str) -> str:
    verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
    table = _TABLE.search(sql)
    return f"{verb} {table.group(1)}" if table else verb


def _on_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    if _count_statements not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count_statements)


def _patch_redis() -> None:
    import redis.asyncio.connection as async_connection
    import redis.connection as sync_connection

    def counting(method: Any) -> Any:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            name = args[0] if args else b"?"
            name = (name.decode() if isinstance(name, bytes) else str(name)).split(" ", 1)[0].upper()
            with _lock:
                counts["redis"] += 1
                kinds[f"redis {name}"] += 1
            return method(self, *args, **kwargs)

        wrapper.__wrapped__ = method  # type: ignore[attr-defined]
        return wrapper

    # Synchronous connections pack every command, alone or in a pipeline, through their serializer's `pack`;
    # asynchronous ones through `pack_command` (which their `pack_commands` calls per command).
    for cls in (sync_connection.PythonRespSerializer, sync_connection.HiredisRespSerializer):
        if not hasattr(cls.pack, "__wrapped__"):
            cls.pack = counting(cls.pack)  # type: ignore[method-assign]
    async_cls = async_connection.AbstractConnection
    if not hasattr(async_cls.pack_command, "__wrapped__"):
        async_cls.pack_command = counting(async_cls.pack_command)  # type: ignore[method-assign]


def _count_task(**kwargs: Any) -> None:
    with _lock:
        counts["tasks"] += 1


def install() -> None:
    """Count from now on (idempotent)."""
    from celery.signals import task_prerun
    from django.db import connections
    from django.db.backends.signals import connection_created

    task_prerun.connect(_count_task, dispatch_uid="bench-instrument-tasks", weak=False)
    connection_created.connect(_on_connection, dispatch_uid="bench-instrument")
    for connection in connections.all(initialized_only=True):
        _on_connection(None, connection)
    _patch_redis()


def _write_forever(folder: Path) -> None:
    path, last = folder / f"{os.getpid()}.json", None
    while True:
        with _lock:
            now = {**counts, "kinds": dict(kinds)}
        if now != last:
            tmp = path.with_suffix(".tmp")
            try:
                tmp.write_text(json.dumps(now))
                os.replace(tmp, path)
            except OSError:
                return  # the stack removed the folder: the run is over
            last = now
        time.sleep(0.25)


def read(folder: Path, pids: list[int]) -> dict[str, Any]:
    """The summed totals the processes `pids` last wrote (a process that wrote nothing yet counts 0), with
    `kinds`, the statements by kind."""
    total: dict[str, Any] = {"sql": 0, "redis": 0, "tasks": 0, "kinds": Counter()}
    for pid in pids:
        try:
            written = json.loads((folder / f"{pid}.json").read_text())
        except (OSError, ValueError):
            continue
        for key in ("sql", "redis", "tasks"):
            total[key] += int(written.get(key, 0))
        total["kinds"].update(written.get("kinds", {}))
    return total


def snapshot(folder: Path, pids: list[int]) -> dict[str, Any]:
    """`read`, after waiting for the writers' next flush (they write every quarter of a second)."""
    time.sleep(0.6)
    return read(folder, pids)


if os.environ.get("BENCH_COUNTS_DIR"):
    install()
    _folder = Path(os.environ["BENCH_COUNTS_DIR"])
    _folder.mkdir(parents=True, exist_ok=True)
    threading.Thread(target=_write_forever, args=(_folder,), name="bench-counts", daemon=True).start()
