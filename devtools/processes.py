"""Starting and stopping processes, free ports, waiting for a condition: the standard library only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What the tests and benchmarks leave to look at: the logs of the processes they start, screenshots (CI keeps the
# folder).
ARTIFACTS = ROOT / "test-artifacts"


def log_folder() -> Path:
    """Where this process logs the processes it starts: ARTIFACTS, or under pytest-xdist (`make test`) a folder of
    the test worker's own (test-artifacts/gw0/, ...), so that two test workers' Celery workers, daphnes or beats
    never append to one file, and a test that reads its processes' logs reads only theirs."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return ARTIFACTS / worker if worker else ARTIFACTS


def free_port(preferred: int | None = None) -> int:
    """A TCP port free on 127.0.0.1 right now: `preferred` if it is free, else one the OS picks."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if preferred is not None:
            try:
                sock.bind(("127.0.0.1", preferred))
                return preferred
            except OSError:
                pass
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    predicate: Callable[[], object], timeout: float = 30, message: str = "condition", interval: float = 0.1
) -> None:
    """Return once `predicate()` is true; raise TimeoutError naming `message` when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {message}")
        time.sleep(interval)


def spawn(
    command: Sequence[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `command` with its stdout and stderr appended to `log`; `new_session` puts it in a process group of
    its own (for `stop_group`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=out,
            stderr=out,
            start_new_session=new_session,
        )


def stop(*processes: subprocess.Popen[bytes] | None, timeout: float = 15) -> None:
    """SIGTERM every process still running, wait up to `timeout` seconds for each, SIGKILL those still there."""
    running = [p for p in processes if p is not None and p.poll() is None]
    for process in running:
        process.terminate()
    for process in running:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_group(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """Stop a process started in a session of its own and everything it started (a shell's children may outlive
    it): SIGTERM to the group, wait up to `timeout` seconds for the whole group to go, then SIGKILL it."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        process.wait()
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.poll()  # reaps the leader, which would otherwise keep the group alive as a zombie
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break  # the whole group is gone
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def celery_command(python: str, role: str, level: str, *options: str) -> list[str]:
    """The command line of a Celery process of the project's app (`role`: worker or beat)."""
    return [python, "-m", "celery", "-A", "researchsite", role, "-l", level, *options]


def worker_command(python: str, concurrency: int, level: str, *options: str) -> list[str]:
    """A worker as production runs one (the threads pool); the tests and the demo add quieter options."""
    return celery_command(
        python,
        "worker",
        level,
        "-P",
        "threads",
        "-c",
        str(concurrency),
        "--without-gossip",
        "--without-mingle",
        *options,
    )
