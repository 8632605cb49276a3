from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate, pre_migrate

from research.record import database


class ResearchConfig(AppConfig):
    name = "research"
    verbose_name = "Deep research"

    def ready(self) -> None:
        pre_migrate.connect(lift_statement_timeout, sender=self, dispatch_uid="research.lift_statement_timeout")
        post_migrate.connect(restore_statement_timeout, sender=self, dispatch_uid="research.restore_statement_timeout")
        from django.contrib.auth.signals import user_logged_out

        from research.live.push import close_session_sockets

        user_logged_out.connect(close_session_sockets, dispatch_uid="research.close_session_sockets")


def lift_statement_timeout(using: str, **kwargs: Any) -> None:
    """No statement timeout while migrating: building an index over a big table may rightly take longer than
    DB_STATEMENT_TIMEOUT allows any one query. The lock timeout stays: a migration that waits behind a long
    transaction fails, rather than queueing every other query of the site behind its own lock request."""
    database.lift_statement_timeout(connections[using])


def restore_statement_timeout(using: str, **kwargs: Any) -> None:
    """Back to the timeout the connection was opened with (tests migrate on a connection they go on using)."""
    database.restore_statement_timeout(connections[using])
