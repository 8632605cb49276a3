"""Moving the test database to a migration and back, for tests of what a migration does to rows stored before it."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> None:
    """Migrate the test database to `targets` (forwards or backwards)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def latest(app: str = "research") -> list[tuple[str, str]]:
    """The app's latest migrations: where a test leaves the database."""
    return list(MigrationExecutor(connection).loader.graph.leaf_nodes(app))
