"""scripts/ensure-services.sh on a machine without PostgreSQL and Redis: it installs them from Debian's packages when
root, and otherwise names every package to install and fails; it never lets the tests run without them."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.processes import ROOT, free_port

SCRIPT = ROOT / "scripts" / "ensure-services.sh"


@pytest.fixture
def bare_machine(tmp_path: Path) -> dict[str, str]:
    """Nothing answers, nothing is installed: a PATH of stubs only, and an empty PostgreSQL config folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "etc-postgresql").mkdir()
    os.symlink(shutil.which("ls"), bin_dir / "ls")
    closed = free_port()
    return {
        "PATH": str(bin_dir),
        "PY": sys.executable,
        "PG_CONF_ROOT": str(tmp_path / "etc-postgresql"),
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed}/deepresearch",
        "REDIS_URL": f"redis://127.0.0.1:{closed}/0",
    }


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_without_root_it_names_every_package_and_fails(bare_machine: dict[str, str]) -> None:
    bin_dir = Path(bare_machine["PATH"])
    stub(bin_dir, "id", "echo 1000")
    stub(bin_dir, "apt-get", "echo apt-get must not run as a user >&2; exit 99")
    result = run(bare_machine)
    assert result.returncode == 1
    assert "sudo apt-get update && sudo apt-get install -y postgresql redis-server" in result.stderr
    assert "must not run" not in result.stderr
    assert "answer." not in result.stdout


def test_as_root_it_installs_both_from_debian_packages(bare_machine: dict[str, str], tmp_path: Path) -> None:
    bin_dir = Path(bare_machine["PATH"])
    calls = tmp_path / "apt-calls"
    stub(bin_dir, "id", "echo 0")
    # The stub records its calls, then fails the install so that the script stops there.
    stub(bin_dir, "apt-get", f'echo "$@" >> {calls}; [ "$1" = update ]')
    result = run(bare_machine)
    assert result.returncode != 0
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq postgresql redis-server"]
    assert "Installing postgresql redis-server from Debian's packages" in result.stdout


def test_as_root_without_apt_it_says_what_to_install(bare_machine: dict[str, str]) -> None:
    stub(Path(bare_machine["PATH"]), "id", "echo 0")
    result = run(bare_machine)
    assert result.returncode == 1
    assert "install -y postgresql redis-server" in result.stderr


def test_a_remote_service_that_does_not_answer_is_reported_not_installed(bare_machine: dict[str, str]) -> None:
    stub(Path(bare_machine["PATH"]), "id", "echo 0")
    env = {**bare_machine, "DATABASE_URL": "postgres://postgres@db.invalid:5432/deepresearch"}
    result = run(env)
    assert result.returncode == 1
    assert "PostgreSQL not reachable" in result.stderr and "Installing" not in result.stdout
