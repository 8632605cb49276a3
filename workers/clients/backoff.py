"""How long a client waits before retrying a transient failure: the server's Retry-After, else jittered backoff."""

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# A server asking for longer than this is treated as asking for this: the task's own retries take over after.
MAX_RETRY_AFTER = 60.0


def parse_retry_after(raw: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or an HTTP date); None when absent or unreadable."""
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff_delay(attempt: int, retry_after: float | None, cap: float = 30.0) -> float:
    """The wait before retry `attempt + 1`: what the server asked for (plus a little jitter), else exponential
    backoff from 0.5 s up to `cap`, scaled by a random factor in [0.5, 1] so that workers failing together do
    not retry together."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_AFTER) + random.uniform(0, 0.25)
    return min(cap, 0.5 * 2**attempt) * random.uniform(0.5, 1.0)
