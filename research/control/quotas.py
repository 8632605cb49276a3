"""What one user may spend, and how fast: daily quotas on model calls, a request rate on the endpoints that spend,
and a throttle on failed sign-ins.

- Quotas are sums over the user's `LlmCall` rows of the last 24 hours (tokens, and dollars of priced calls): the
  record of what was spent is the only counter, so there is nothing to keep in step with it.
- Request rates and failed sign-ins are sliding windows of `RateHit` rows, in the database beside the spending
  they limit: every web process sees the same rows, and an admitted request's row commits or rolls back with the
  work it admits. A key's check and its new row are one transaction holding a lock on the key (a PostgreSQL
  advisory lock), so two processes cannot both take the last place in a window.

A refusal is `Throttled`, a ServiceError the API answers with 429 and a Retry-After header.
"""

import functools
import hashlib
import math
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from research.control.services import ServiceError
from research.models import LlmCall, RateHit
from research.record import database

DAY = timedelta(hours=24)
SPEND_WINDOW = 60  # seconds: SPEND_RATE_LIMIT is requests per minute
# Expired rows of other keys deleted per admitted request: bounded, so a burst of stale keys never slows one request.
PURGE_BATCH = 100


class Throttled(ServiceError):
    """Refused for now; `retry_after` is the whole number of seconds (at least 1) after which it may succeed."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


# --- Quotas ---------------------------------------------------------------------------------------------------


def quota_wait(user_id: Any, now: datetime | None = None) -> tuple[str, float] | None:
    """None while the user is under every daily quota; else why not, and the seconds until enough of the last 24
    hours' spending ages out to bring the user back under all of them."""
    token_quota, usd_quota = settings.USER_DAILY_TOKEN_QUOTA, settings.USER_DAILY_USD_QUOTA
    if not token_quota and not usd_quota:
        return None
    now = now or timezone.now()
    calls = LlmCall.objects.filter(user_id=user_id, created_at__gt=now - DAY)
    totals = calls.aggregate(tokens=Sum(F("prompt_tokens") + F("completion_tokens")), usd=Sum("cost_usd"))
    reasons, wait = [], 0.0
    tokens = totals["tokens"] or 0
    if token_quota and tokens >= token_quota:
        rows = calls.order_by("created_at", "id").values_list("created_at", "prompt_tokens", "completion_tokens")
        aged_out = _aged_out_at(((at, p + c) for at, p, c in rows.iterator()), tokens - token_quota)
        reasons.append(f"{tokens} of your daily {token_quota} tokens")
        wait = max(wait, (aged_out + DAY - now).total_seconds())
    usd = totals["usd"] or Decimal(0)
    usd_limit = Decimal(str(usd_quota))
    if usd_quota and usd >= usd_limit:
        priced = calls.filter(cost_usd__gt=0).order_by("created_at", "id").values_list("created_at", "cost_usd")
        aged_out = _aged_out_at(priced.iterator(), usd - usd_limit)
        reasons.append(f"${usd:.2f} of your daily ${usd_limit:.2f}")
        wait = max(wait, (aged_out + DAY - now).total_seconds())
    if not reasons:
        return None
    return "daily quota reached: you have used " + " and ".join(reasons) + " in the last 24 hours", wait


def _aged_out_at(calls: Iterable[tuple[datetime, Any]], excess: Any) -> datetime:
    """When the calls (oldest first) whose amounts add up to more than `excess` have been made: the moment the
    last of them leaves the window is when the total falls below the quota."""
    aged = 0
    made_at = None
    for made_at, amount in calls:
        aged += amount
        if aged > excess:
            return made_at
    # Only reachable when the total is exactly zero over a zero quota, which `0 = none` rules out.
    return made_at or timezone.now()


def check_quota(user: Any) -> None:
    over = quota_wait(user.pk)
    if over is not None:
        reason, wait = over
        raise Throttled(f"{reason}; try again in {_duration(wait)}", wait)


# --- Sliding windows of RateHit rows ------------------------------------------------------------------------


def window_wait(key: str, limit: int, window: float, now: datetime | None = None) -> float:
    """0 while `key` has fewer than `limit` hits in the last `window` seconds; else the seconds until one ages out."""
    now = now or timezone.now()
    recent = RateHit.objects.filter(key=key, created_at__gt=now - timedelta(seconds=window))
    newest = list(recent.order_by("-created_at").values_list("created_at", flat=True)[:limit])
    if len(newest) < limit:
        return 0.0
    # The window admits again once the limit-th newest hit has left it.
    return max((newest[-1] + timedelta(seconds=window) - now).total_seconds(), 0.001)


def record_hit(key: str, window: float, now: datetime | None = None) -> None:
    now = now or timezone.now()
    RateHit.objects.create(key=key, created_at=now, expires_at=now + timedelta(seconds=window))
    _purge(now)


def admit(key: str, limit: int, window: float) -> float:
    """Count one more hit on `key` if the window has room (returns 0); else the seconds to wait, nothing counted."""
    with transaction.atomic():
        database.lock_key(key)  # the checks of one key one at a time
        now = timezone.now()
        wait = window_wait(key, limit, window, now)
        if not wait:
            record_hit(key, window, now)
        return wait


def clear(key: str) -> None:
    RateHit.objects.filter(key=key).delete()


def _purge(now: datetime) -> None:
    """Delete some rows older than their window, whatever their key; rows another transaction holds are skipped
    (SKIP LOCKED), so concurrent purges neither wait for nor deadlock with each other."""
    with transaction.atomic():
        stale = list(
            RateHit.objects.filter(expires_at__lte=now)
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:PURGE_BATCH]
        )
        if stale:
            RateHit.objects.filter(pk__in=stale).delete()


# --- Spending endpoints -----------------------------------------------------------------------------------------


def check_spend_rate(user: Any) -> None:
    limit = settings.SPEND_RATE_LIMIT
    if not limit:
        return
    wait = admit(f"spend:{user.pk}", limit, SPEND_WINDOW)
    if wait:
        raise Throttled(
            f"too many requests: at most {limit} a minute start work that costs money; try again in {_duration(wait)}",
            wait,
        )


def check_spending(user: Any) -> None:
    """Raise Throttled when `user` may not spend now: over the request rate, or at a daily quota."""
    check_spend_rate(user)
    check_quota(user)


def spends_money(view: Callable[..., Any]) -> Callable[..., Any]:
    """For API views that cost model calls: refused with Throttled (429) before the view runs. Goes below
    `api_view`, which signs the user in and turns Throttled into the 429 answer."""

    @functools.wraps(view)
    def wrapper(request: Any, *args: Any, **kwargs: Any) -> Any:
        check_spending(request.user)
        return view(request, *args, **kwargs)

    return wrapper


# --- Sign-in ----------------------------------------------------------------------------------------------------


def _login_keys(username: str, client_ip: str) -> list[str]:
    # Hashed: a username may be any text up to the form's limit; lower-cased so "Alice" and "alice" count together.
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    return [f"login-user:{name}", f"login-ip:{client_ip[:100]}"]


def login_wait(username: str, client_ip: str) -> int:
    """0 when a sign-in may be tried; else the seconds until the username and the address both may again."""
    limit, window = settings.LOGIN_RATE_LIMIT, settings.LOGIN_RATE_WINDOW
    if not limit:
        return 0
    wait = max(window_wait(key, limit, window) for key in _login_keys(username, client_ip))
    return max(1, math.ceil(wait)) if wait else 0


def login_failed(username: str, client_ip: str) -> None:
    if not settings.LOGIN_RATE_LIMIT:
        return
    now = timezone.now()
    with transaction.atomic():
        for key in _login_keys(username, client_ip):
            record_hit(key, settings.LOGIN_RATE_WINDOW, now)


def login_succeeded(username: str) -> None:
    """The right password ends the username's run of failures (not the address's: one address may try many)."""
    clear(_login_keys(username, "")[0])


def _duration(seconds: float) -> str:
    seconds = max(1, math.ceil(seconds))
    if seconds < 120:
        return f"{seconds} seconds"
    if seconds < 7200:
        return f"{math.ceil(seconds / 60)} minutes"
    hours, minutes = divmod(math.ceil(seconds / 60), 60)
    return f"{hours} h {minutes} min"
