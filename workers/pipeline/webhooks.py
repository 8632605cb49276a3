"""A schedule's webhook: called once the report version of a scheduled run is stored (or the run ended without one).

The tick that starts due runs also looks for versions landed and not yet announced, so a call needs no message of
its own and none is lost to a worker that died: the schedule's `notified_version` is moved on by a conditional
update before the call, which only one tick wins (a version is announced at most once; the call itself is tried
WEBHOOK_ATTEMPTS times). Every call is signed: `X-DeepResearch-Signature: sha256=<hex>`, the HMAC-SHA256 of
`<timestamp>.<body>` with the schedule's secret, the timestamp in `X-DeepResearch-Timestamp` (reject old ones to
stop replays). Like a page fetch, a call connects only to public addresses and follows no redirect.
"""

import hashlib
import hmac
import json
import logging
import time
from typing import Any

import requests
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from research.models import FINISHED_STATUSES, Document, DocumentKind, Research, Schedule
from workers.clients.netguard import BlockedAddressError, BlockedURLError, GuardedAdapter, check_url

log = logging.getLogger(__name__)

# Schedules announced at most per tick; the rest wait for the next.
MAX_PER_TICK = 20
# Seconds between two tries of a call that failed.
RETRY_PAUSES = (1.0, 3.0, 9.0)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The value of X-DeepResearch-Signature for this body sent at this timestamp."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def deliver_due() -> dict[str, int]:
    """Call the webhook of each schedule whose last run has ended and was not announced yet; how many calls
    answered well ("delivered") and how many did not ("failed"). The schedule's next run waits for this call
    (research/control/schedules.py), so a run's version is always announced before the next run starts."""
    results = {"delivered": 0, "failed": 0}
    due = (
        Schedule.objects.exclude(webhook="")
        .filter(run_version__gt=F("notified_version"), research__status__in=FINISHED_STATUSES)
        .order_by("pk")[:MAX_PER_TICK]
    )
    for schedule in due:
        version = schedule.run_version
        if not Schedule.objects.filter(pk=schedule.pk, notified_version__lt=version).update(notified_version=version):
            continue  # another tick announces it
        result = call(schedule, payload(schedule, version))
        Schedule.objects.filter(pk=schedule.pk).update(webhook_result=result[:100])
        results["delivered" if result.startswith("2") else "failed"] += 1
    return results


def payload(schedule: Schedule, version: int) -> dict[str, Any]:
    research = Research.objects.only("title", "status", "outcome").get(pk=schedule.research_id)
    document = (
        Document.objects.filter(research_id=research.pk, kind=DocumentKind.REPORT, version=version)
        .only("stats", "created_at")
        .first()
    )
    base = settings.APP_BASE_URL.rstrip("/")
    body: dict[str, Any] = {
        "event": "report.ready" if document is not None else "run.ended",
        "research_id": str(research.pk),
        "title": research.title,
        "run": schedule.runs,
        "version": version,
        "status": research.status,
        "outcome": research.outcome,
        "url": f"{base}/research/{research.pk}/",
        "sent_at": timezone.now().isoformat(),
    }
    if document is not None:
        body["report_url"] = f"{base}/api/research/{research.pk}/report.md?version={version}"
        body["changes"] = (document.stats or {}).get("changes")
    return body


def call(schedule: Schedule, body: dict[str, Any]) -> str:
    """POST the signed body to the schedule's webhook, tried up to WEBHOOK_ATTEMPTS times; the HTTP status it
    answered ("200"), or why it was not reached ("timeout", "blocked: ...")."""
    data = json.dumps(body).encode()
    result = "not called"
    for attempt in range(settings.WEBHOOK_ATTEMPTS):
        if attempt:
            time.sleep(RETRY_PAUSES[min(attempt - 1, len(RETRY_PAUSES) - 1)])
        result, again = _post(schedule.webhook, schedule.secret, body["event"], data)
        if not again:
            break
    log.info("webhook of schedule %s (version %s): %s", schedule.pk, body["version"], result)
    return result


def _post(url: str, secret: str, event: str, data: bytes) -> tuple[str, bool]:
    """One call: what it gave, and whether it is worth trying again."""
    try:
        check_url(url)
    except BlockedURLError as exc:
        return f"blocked: {exc.reason}", False
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "deep-research-webhook/1",
        "X-DeepResearch-Event": event,
        "X-DeepResearch-Timestamp": timestamp,
        "X-DeepResearch-Signature": signature(secret, timestamp, data),
    }
    with requests.Session() as session:
        session.trust_env = False  # no proxy: it would resolve the address beyond the guard's reach
        adapter = GuardedAdapter(settings.WEBHOOK_ALLOWED_PRIVATE_HOSTS)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        try:
            response = session.post(
                url, data=data, headers=headers, timeout=settings.WEBHOOK_TIMEOUT, allow_redirects=False
            )
        except BlockedAddressError:
            return "blocked: private address", False
        except (BlockedURLError, requests.exceptions.InvalidURL, ValueError):
            return "blocked: bad_url", False
        except requests.Timeout:
            return "timeout", True
        except requests.RequestException as exc:
            return f"error: {type(exc).__name__}", True
    status = response.status_code
    return str(status), status >= 500 or status in (408, 429)
