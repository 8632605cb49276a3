#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer where DATABASE_URL and REDIS_URL point (local defaults otherwise).
# Installed but stopped: start them. Not installed: install from Debian's packages when root, else say what to
# install. Never lets the tests run silently without them.
set -euo pipefail

PY=${PY:-.venv/bin/python}

pg_up() { "$PY" - <<'PYEOF'
import os, sys
import psycopg
url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
url = url.rsplit("/", 1)[0] + "/postgres"
try:
    psycopg.connect(url, connect_timeout=3).close()
except Exception as exc:
    print(f"PostgreSQL not reachable: {exc}", file=sys.stderr)
    sys.exit(1)
PYEOF
}

redis_up() { "$PY" - <<'PYEOF'
import os, sys
import redis
try:
    redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), socket_timeout=3).ping()
except Exception as exc:
    print(f"Redis not reachable: {exc}", file=sys.stderr)
    sys.exit(1)
PYEOF
}

install_debian() {
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
    echo "Missing $1. Install it, e.g.: sudo apt-get install -y $2" >&2
    exit 1
  fi
  echo "Installing $2 from Debian's packages..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

start_postgres() {
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    install_debian "PostgreSQL" postgresql
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  # Trust auth on loopback for the local test superuser, as on the CI machine.
  hba=/etc/postgresql/$version/main/pg_hba.conf
  if [ -w "$hba" ] && ! grep -q "deep-research" "$hba"; then
    sed -i '1i host all postgres 127.0.0.1/32 trust # deep-research tests\nhost all postgres ::1/128 trust # deep-research tests' "$hba"
  fi
  # Started by apt already (then only the trust lines need loading), or stopped.
  if pg_ctlcluster --skip-systemctl-redirect "$version" main status >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  else
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
}

start_redis() {
  command -v redis-server >/dev/null || install_debian "Redis" redis-server
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

wait_for() { for _ in $(seq 1 30); do "$1" 2>/dev/null && return 0; sleep 1; done; "$1"; }

if ! pg_up 2>/dev/null; then
  case "${DATABASE_URL:-}" in
    ""|*127.0.0.1*|*localhost*) echo "PostgreSQL is down; starting it." ; start_postgres; wait_for pg_up ;;
    *) pg_up ;;
  esac
fi
if ! redis_up 2>/dev/null; then
  case "${REDIS_URL:-}" in
    ""|*127.0.0.1*|*localhost*) echo "Redis is down; starting it." ; start_redis; wait_for redis_up ;;
    *) redis_up ;;
  esac
fi
echo "PostgreSQL and Redis answer."
