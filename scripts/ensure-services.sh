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

PG_CONF_ROOT=${PG_CONF_ROOT:-/etc/postgresql}

# Every missing package at once: a user who has to install them by hand learns the whole list in one run.
install_debian() {
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
    echo "Missing: $*. PostgreSQL and Redis are needed by the tests; install them, e.g.:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y $*" >&2
    exit 1
  fi
  echo "Installing $* from Debian's packages..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

start_postgres() {
  version=$(ls "$PG_CONF_ROOT" | sort -V | tail -n 1)
  # Trust auth on loopback for the local test superuser, as on the CI machine.
  hba=$PG_CONF_ROOT/$version/main/pg_hba.conf
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
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

wait_for() { for _ in $(seq 1 30); do "$1" 2>/dev/null && return 0; sleep 1; done; "$1"; }

is_local() { case "${1:-}" in ""|*127.0.0.1*|*localhost*) return 0 ;; *) return 1 ;; esac; }

pg_down=0; redis_down=0
pg_error=$(pg_up 2>&1) || pg_down=1
redis_error=$(redis_up 2>&1) || redis_down=1
# A remote service that does not answer is not ours to start: say why it failed.
if [ $pg_down = 1 ] && ! is_local "${DATABASE_URL:-}"; then echo "$pg_error" >&2; exit 1; fi
if [ $redis_down = 1 ] && ! is_local "${REDIS_URL:-}"; then echo "$redis_error" >&2; exit 1; fi

packages=()
if [ $pg_down = 1 ] && ! ls "$PG_CONF_ROOT"/*/main >/dev/null 2>&1; then packages+=(postgresql); fi
if [ $redis_down = 1 ] && ! command -v redis-server >/dev/null; then packages+=(redis-server); fi
if [ ${#packages[@]} -gt 0 ]; then install_debian "${packages[@]}"; fi

if [ $pg_down = 1 ]; then
  echo "PostgreSQL does not answer; starting it. (${pg_error//$'\n'/ })"
  start_postgres
  wait_for pg_up
fi
if [ $redis_down = 1 ]; then
  echo "Redis does not answer; starting it. (${redis_error//$'\n'/ })"
  start_redis
  wait_for redis_up
fi
echo "PostgreSQL and Redis answer."
