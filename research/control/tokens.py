"""Personal API tokens: made, found and revoked. A token stands for its owner on the JSON API and the MCP server,
with the same isolation, quotas and rate limits as a signed-in session; a read-only one only reads."""

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from research.models import ApiToken

# Recognisable in logs, config files and secret scanners; the rest is 256 random bits.
TOKEN_PREFIX = "drt_"
# The characters of a secret kept in clear, so lists can tell tokens apart (the prefix and 8 random characters).
SHOWN_CHARACTERS = len(TOKEN_PREFIX) + 8
MAX_TOKENS_PER_USER = 50
MAX_NAME_CHARS = 100
# How stale "last used" may be: one write a minute per token at most, however often it calls.
LAST_USE_RESOLUTION = timedelta(minutes=1)


class TooManyTokens(Exception):
    pass


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create(owner: User, name: str, read_only: bool) -> tuple[ApiToken, str]:
    """A new token and its secret: the only time the secret exists outside the caller's hands."""
    if ApiToken.objects.filter(owner=owner).count() >= MAX_TOKENS_PER_USER:
        raise TooManyTokens(f"at most {MAX_TOKENS_PER_USER} tokens per user: revoke one first")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        owner=owner, name=name, prefix=secret[:SHOWN_CHARACTERS], digest=digest(secret), read_only=read_only
    )
    return token, secret


def authenticate(secret: str) -> ApiToken | None:
    """The live token with that secret, its owner active; None for anything else (revoked, unknown, malformed)."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    token = ApiToken.objects.select_related("owner").filter(digest=digest(secret)).first()
    if token is None or not token.owner.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or token.last_used_at < now - LAST_USE_RESOLUTION:
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USE_RESOLUTION)
        ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke(owner: User, token_id: int) -> bool:
    """Deletes one of the owner's tokens: its next request is refused. False where the owner has no such token."""
    if not 0 < token_id < 2**63:  # beyond the id column: no such token, not a database error
        return False
    deleted, _ = ApiToken.objects.filter(pk=token_id, owner=owner).delete()
    return bool(deleted)


def listed(owner: User) -> list[dict]:
    """The owner's tokens as the API and the page show them: never the secret or its digest."""
    return [
        {
            "id": token.pk,
            "name": token.name,
            "prefix": token.prefix,
            "read_only": token.read_only,
            "created_at": token.created_at.isoformat(),
            "last_used_at": token.last_used_at and token.last_used_at.isoformat(),
        }
        for token in ApiToken.objects.filter(owner=owner)
    ]
