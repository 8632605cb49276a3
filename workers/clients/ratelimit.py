"""Limits shared by every worker through Redis: a request rate per service, a concurrency per host.

Adding workers must not add load on a provider: the limits are counted in Redis, not per process. Both are
sliding-window / lease structures kept in sorted sets and changed atomically by Lua scripts, timed by the Redis
server's clock so that workers on different machines agree. Waiting too long for either is a TransientError: the
provider or host is busy, not wrong, so the task is retried later rather than its step failed for good.
"""

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import redis
from django.conf import settings
from redis.commands.core import Script

from workers.clients.deadline import time_left
from workers.errors import TransientError

# Admit one more call if fewer than `limit` were admitted in the last `window` ms; else say how long to wait.
_RATE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window * 2)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""

# Take one of `limit` slots; a slot holder that died frees its slot when its lease runs out.
_SLOT = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 1
end
return 0
"""

_local = threading.local()


class _Redis(NamedTuple):
    """A thread's client and the limiter's scripts on it, registered once (registering hashes a script's text), for
    the Redis at `url` (tests point the setting elsewhere between runs)."""

    url: str
    client: redis.Redis
    rate: Script
    slot: Script


def _redis() -> _Redis:
    current: _Redis | None = getattr(_local, "redis", None)
    url = settings.REDIS_URL
    if current is None or current.url != url:
        client = redis.Redis.from_url(url, socket_timeout=5)
        current = _local.redis = _Redis(url, client, client.register_script(_RATE), client.register_script(_SLOT))
    return current


def wait_for_rate(service: str, per_second: float, max_wait: float = 300.0) -> None:
    """Block until a call to `service` fits under `per_second` across all workers (no-op when 0)."""
    if per_second <= 0:
        return
    # Below one call a second the window grows; above, fractional rates round down (the safe side).
    window_ms, limit = (1000, int(per_second)) if per_second >= 1 else (int(1000 / per_second), 1)
    deadline = time.monotonic() + max_wait
    member = uuid.uuid4().hex
    script = _redis().rate
    while True:
        wait_ms = int(script(keys=[f"ratelimit:{service}"], args=[window_ms, limit, member]))
        if wait_ms == 0:
            return
        if time.monotonic() + wait_ms / 1000 > deadline:
            raise TransientError(f"rate limit for {service} did not admit a call within {max_wait}s", wait_ms / 1000)
        time.sleep(wait_ms / 1000)


def wait_for_rate_until(service: str, per_second: float, expires_at: float, what: str) -> None:
    """Wait for the limiter to admit a call, no longer than the call's deadline (a `time.monotonic()` value)
    allows; either way out is a TransientError, so the task retries."""
    wait_for_rate(service, per_second, time_left(expires_at, what))


@contextmanager
def host_slot(host: str, limit: int, lease_seconds: float, max_wait: float) -> Iterator[None]:
    """Hold one of `limit` concurrent slots for `host` across all workers (no-op when limit is 0)."""
    if limit <= 0:
        yield
        return
    key, member = f"hostslots:{host}", uuid.uuid4().hex
    limiter = _redis()
    deadline = time.monotonic() + max_wait
    while not int(limiter.slot(keys=[key], args=[limit, int(lease_seconds * 1000), member])):
        if time.monotonic() > deadline:
            raise TransientError(f"no free slot for {host} within {max_wait}s")
        time.sleep(0.05)
    try:
        yield
    finally:
        limiter.client.zrem(key, member)
