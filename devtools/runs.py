"""A Redis db of its own for each test or benchmark run, so that runs on one machine never share a broker or a
channel layer."""

from __future__ import annotations

# Test and benchmark runs claim their db under the same key, which keeps them apart from each other.
CLAIM_KEY = "deepresearch:test-run"
# A claim expires on its own, in case a run is killed before it gives its db back.
CLAIM_SECONDS = 3 * 3600


def claim_redis_db(base_url: str, owner: str) -> str:
    """The URL of a free Redis db (1-15) on the server of `base_url`, claimed for `owner` with SET NX and emptied."""
    import redis

    base = base_url.rsplit("/", 1)[0]
    for db in range(1, 16):
        candidate = f"{base}/{db}"
        connection = redis.Redis.from_url(candidate)
        if connection.set(CLAIM_KEY, owner, nx=True, ex=CLAIM_SECONDS):
            connection.flushdb()
            connection.set(CLAIM_KEY, owner, ex=CLAIM_SECONDS)
            return candidate
    raise RuntimeError("no free Redis db (1-15) for this run; are 15 runs going at once?")


# Empties the db only while `owner` still holds its claim, in one step: a run that gave its db back early (the
# controller of a pytest-xdist run does) or whose claim expired must not empty a db another run claimed since.
_RELEASE_IF_OWNER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('FLUSHDB')
    return 1
end
return 0
"""


def release_redis_db(url: str, owner: str) -> bool:
    """Give back the db of `url` claimed for `owner`: empty it, the claim key with the rest. False where `owner` no
    longer holds it (nothing is emptied then)."""
    import redis

    return bool(redis.Redis.from_url(url).eval(_RELEASE_IF_OWNER, 1, CLAIM_KEY, owner))
