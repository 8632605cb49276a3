"""Share links: a read-only link to one report version, for anyone holding it. Made, listed and revoked by the
research's owner; opened by anyone, within a rate limit per client address."""

import secrets
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from research.control.quotas import Throttled, admit
from research.control.services import ServiceError
from research.models import Document, DocumentKind, Research, ShareLink

SHARE_WINDOW = 60  # seconds: SHARE_RATE_LIMIT is views per minute


class NotShareable(ServiceError):
    pass


def create(research: Research, version: int | None, expires_in: int | None) -> ShareLink:
    """A new link to `version` of the report (its latest where None), living `expires_in` seconds (for ever where
    None)."""
    reports = Document.objects.filter(research=research, kind=DocumentKind.REPORT)
    version = version if version is not None else research.report_version
    if not reports.filter(version=version).exists():
        raise NotShareable(f"this research has no report version {version} to share", "version")
    expires_at = timezone.now() + timedelta(seconds=expires_in) if expires_in is not None else None
    return ShareLink.objects.create(
        research=research, version=version, key=secrets.token_urlsafe(24), expires_at=expires_at
    )


def live(research: Research) -> list[ShareLink]:
    """The research's links that still open, newest first (expired ones are deleted as they are found)."""
    ShareLink.objects.filter(research=research, expires_at__lte=timezone.now()).delete()
    return list(ShareLink.objects.filter(research=research))


def revoke(research: Research, share_id: int) -> bool:
    if not 0 < share_id < 2**63:  # beyond the id column: no such link, not a database error
        return False
    deleted, _ = ShareLink.objects.filter(research=research, pk=share_id).delete()
    return bool(deleted)


def opened(key: str, client_ip: str) -> tuple[ShareLink, Document] | None:
    """The link and its report version, for a viewer at `client_ip`; None for a key that is unknown, revoked or
    expired. Every try counts against the address's limit, a right key or a wrong one (Throttled past it)."""
    wait = admit(f"share-ip:{client_ip}", settings.SHARE_RATE_LIMIT, SHARE_WINDOW)
    if wait:
        raise Throttled("too many shared reports opened from this address: try again shortly", wait)
    if len(key) > 64:
        return None
    link = ShareLink.objects.select_related("research").filter(key=key).first()
    if link is None or (link.expires_at is not None and link.expires_at <= timezone.now()):
        return None
    report = Document.objects.filter(research_id=link.research_id, kind=DocumentKind.REPORT, version=link.version)
    document = report.first()
    return (link, document) if document is not None else None
