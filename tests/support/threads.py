"""Work done on another thread, on a database connection of its own, as another process would."""

import threading
from typing import Any

from django.db import connection

from research import lifecycle


def cancel_in_background(research_id: Any) -> tuple[threading.Thread, threading.Event]:
    """Cancel the research from a thread of its own, started; the thread, and an event set once the cancel has
    returned (a test can see that it waits)."""
    cancelled = threading.Event()

    def cancel() -> None:
        try:
            lifecycle.cancel_research(research_id)
            cancelled.set()
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel, daemon=True)
    canceller.start()
    return canceller, cancelled
