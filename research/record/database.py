"""Hand-written SQL for the hot paths, and the PostgreSQL features they rely on.

The steps that run per model request, per website or per push write and read through one hand-written statement
each (data-modifying WITH, `jsonb_array_elements`, `FOR UPDATE` in a subquery, `ON CONFLICT ... RETURNING`), where
the ORM would take several round trips and build its statements anew every time (docs/performance.md, "Cheaper
steps"). These helpers are what those statements share: a cursor that prepares them, reads made into the values
and instances the ORM would make, row and advisory locks, and a transaction's consistent view.
"""

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)


def prepared_cursor() -> Any:
    """A cursor for the hand-written statements of the hot paths (use it as `connection.cursor()` is used).

    With prepared statements on (DB_PREPARED_STATEMENTS, the default): a cursor that binds its
    parameters on the server, so that psycopg prepares a statement the second time a connection runs it and
    PostgreSQL parses and plans it once per connection, not on every call. Those statements are a fixed text for
    each call site, run thousands of times a research; preparing them took about 27 % off PostgreSQL's CPU per step
    (docs/performance.md, Finding 21). The ORM keeps Django's client-side binding, where psycopg prepares nothing,
    since not every statement the ORM writes can be prepared. A text of several commands, or a SET, needs the
    plain `connection.cursor()` (the simple query protocol). Prepared statements off (for a pooler in transaction
    mode that cannot keep them, PgBouncer before 1.21): the plain cursor.
    """
    # The thread's own connection, looked up once: every attribute read through `django.db.connection` looks it
    # up again in a thread-local, a few microseconds each, many times a step.
    database: Any = connections[DEFAULT_DB_ALIAS]
    if database.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        return database.cursor()
    # What `connection.cursor()` does before it makes its cursor: the health check, the connection, the thread.
    database.close_if_health_check_failed()
    database.ensure_connection()
    database.validate_thread_sharing()
    with database.wrap_database_errors:
        raw = _server_binding_cursor()(database.connection)  # psycopg's Cursor(connection)
    return (_LoggedCursor if database.queries_logged else CursorWrapper)(raw, database)


@functools.cache
def _server_binding_cursor() -> Any:
    """Django's cursor class that binds on the server, imported once (it is defined with psycopg 3 only)."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    return ServerBindingCursor


class _LoggedCursor(CursorDebugWrapper):
    """Django's logging cursor (DEBUG, or a test capturing statements) around a prepared cursor: psycopg keeps no
    text of a prepared statement's run for the log to read back, so each statement is logged with its parameters
    composed in before it runs, as Django's own cursors log it."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        database: Any = self.db  # PostgreSQL's: its operations compose, its driver module raises
        try:
            logged = database.ops.compose_sql(sql, params) if params is not None else sql
        except database.Database.DataError:  # what the driver could not compose is logged as written
            logged = sql
        with self.debug_sql(logged, params):
            return CursorWrapper.execute(self, sql, params)


def read_row(model: type[Model], pk: Any, sql: str) -> tuple[Any, ...] | None:
    """The row `sql` reads of the `model` row with key `pk` (its one parameter), None when there is no such row:
    a hand-written SELECT, where the ORM would build the query anew for each of these reads, which run per model
    request and per step. psycopg returns the values as the ORM would (aware datetimes, Decimals)."""
    with prepared_cursor() as cursor:
        cursor.execute(sql, [model._meta.pk.get_db_prep_value(pk, connection)])
        return cursor.fetchone()


def instance_columns(model: type[Model], alias: str) -> str:
    """The SELECT list of the `model` table joined as `alias` that `instance_from_row` takes: its concrete
    fields' columns, in their order."""
    return ", ".join(f"{alias}.{field.column}" for field in model._meta.concrete_fields)


def instance_from_row(model: type[M], row: Sequence[Any]) -> M:
    """The `model` instance the ORM would make of `row`: the values of its concrete fields, in their order, read by
    hand-written SQL. Each field decodes its value as for the ORM's own reads (a JSON field decodes jsonb, which
    Django's psycopg setup loads as text), so the instance compares and saves as one the ORM read; psycopg returns
    the other columns as the ORM would.
    """
    fields = model._meta.concrete_fields
    values = [
        field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") else value
        for field, value in zip(fields, row, strict=True)
    ]
    return model.from_db(connection.alias, [field.attname for field in fields], values)


def read_instance(model: type[M], pk: Any) -> M | None:
    """The `model` row with key `pk` as an instance, None where there is none: a hand-written SELECT of its columns
    made into the instance the ORM would make (`instance_from_row`), where the ORM compiled the read anew for every
    step that starts from a whole row."""
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT {instance_columns(model, 't')} FROM {model._meta.db_table} t WHERE t.{model._meta.pk.column} = %s",
            [model._meta.pk.get_db_prep_value(pk, connection)],
        )
        row = cursor.fetchone()
    return None if row is None else instance_from_row(model, row)


def read_values(
    model: type[Model],
    fields: Sequence[str],
    where: str,
    params: Sequence[Any] | Mapping[str, Any],
    extra: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of `model` that `where` (a condition, then any ORDER BY or LIMIT) selects, as `.values(*fields)`
    returns them: a dict of each row by field name (a foreign key by its attname, `query_id`), each value converted
    by the converters the ORM applies to that column. For reads that run for every push, where the ORM would build
    the statement anew each time (two thirds of a push's time at 110 queries × 7 pages).

    Each value goes through the converters the ORM uses for its column: jsonb, which Django's psycopg setup loads as
    text, is decoded as the JSON field decodes it. `extra`: more values by name, each the SQL expression that
    computes it, returned as the driver reads them.
    """
    table = model._meta.db_table
    columns = [cast("Field[Any, Any]", model._meta.get_field(name)) for name in fields]
    converters = []
    for field in columns:
        column = field.get_col(table)
        converters.append((column, [*connection.ops.get_db_converters(column), *field.get_db_converters(connection)]))
    extra = extra or {}
    selected = [f"{field.column}" for field in columns] + list(extra.values())
    sql = f"SELECT {', '.join(selected)} FROM {table} WHERE {where}"
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    values = []
    for row in rows:
        item = dict(zip(extra, row[len(fields) :], strict=True))
        for name, (column, convert), value in zip(fields, converters, row[: len(fields)], strict=True):
            for converter in convert:
                value = converter(value, column, connection)
            item[name] = value
        values.append(item)
    return values


def json_value(value: Any) -> Any:
    """A JSON column's list or object as a step uses it, whether it came from hand-written SQL or from the ORM (the
    ORM's reads return it decoded). For columns that hold lists or objects only: a JSON string would be ambiguous.
    A hand-written read returns jsonb as text, since Django's psycopg setup loads it so for the JSON field to
    decode.
    """
    return json.loads(value) if isinstance(value, str) else value


def lock_row(model: type[Model], pk: Any, exclusive: bool = False) -> None:
    """Inside a transaction: hold the `model` row with key `pk` against other writers of it until the transaction ends.

    `SELECT ... FOR NO KEY UPDATE`: a row lock that rows being inserted with a foreign key to it (which
    take FOR KEY SHARE) do not wait for. `exclusive`: FOR UPDATE, which waits for those too, and for the tree
    transactions that read the row FOR KEY SHARE (workers/pipeline/tree_writes.py), and makes them wait.
    """
    strength = "UPDATE" if exclusive else "NO KEY UPDATE"
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {model._meta.db_table} WHERE {model._meta.pk.column} = %s FOR {strength}",
            [model._meta.pk.get_db_prep_value(pk, connection)],
        )


def lock_key(key: str) -> None:
    """Inside a transaction: serialise, until it ends, the transactions that lock the same `key` (any string).

    `pg_advisory_xact_lock` on a 64-bit hash of the key, released at commit or rollback; transactions that lock
    other keys do not wait.
    """
    number = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)
    with prepared_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [number])


def begin_consistent_view(lock_timeout_ms: int | None = None) -> int:
    """The first call in a transaction: every later read of it sees one moment. Returns the view's xmin (the oldest
    transaction id still running at that moment).

    REPEATABLE READ (READ COMMITTED, the default, takes a new view per statement), `lock_timeout_ms` as the
    transaction's lock timeout (a read that waits longer for a table lock fails with LockNotAvailable), and the
    view's xmin read by the first statement, which takes the view.
    """
    # One round trip for the three statements (a push takes a view every few events): without parameters psycopg
    # sends them as one simple query, and the last one's row is the view's xmin.
    limit = "" if lock_timeout_ms is None else f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}; "
    with connection.cursor() as cursor:
        cursor.execute(
            f"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; {limit}"
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
        )
        while cursor.nextset():
            pass
        return cursor.fetchone()[0]


def limit_lock_waits(lock_timeout_ms: int) -> None:
    """In a transaction: a statement of it that waits longer than `lock_timeout_ms` for a lock fails
    (LockNotAvailable) instead of waiting on: the transaction's lock_timeout."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")


def lift_statement_timeout(database: BaseDatabaseWrapper) -> None:
    """No statement timeout on this connection until `restore_statement_timeout` (used while migrating).

    `SET statement_timeout = 0` for the session; the lock timeout stays.
    """
    with database.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")


def restore_statement_timeout(database: BaseDatabaseWrapper) -> None:
    """The statement timeout the connection was opened with, back after `lift_statement_timeout`."""
    with database.cursor() as cursor:
        cursor.execute("RESET statement_timeout")
