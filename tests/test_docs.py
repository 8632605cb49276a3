"""Configuration docs stay true: every variable the settings read is in .env.example and the README."""

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def settings_variables() -> set[str]:
    source = (ROOT / "researchsite/settings.py").read_text()
    names = set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', source))
    return names | {f"LLM_MODEL_{agent.upper()}" for agent in settings.LLM_AGENT_MODELS}


def test_every_setting_is_documented() -> None:
    env_example = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^([A-Z0-9_]+)=", env_example, re.MULTILINE))
    variables = settings_variables()
    assert "DATABASE_URL" in variables and "LLM_MODEL_REPORT_WRITER" in variables
    assert variables - documented == set()
    assert {v for v in variables if f"`{v}`" not in readme} == set()


def test_readme_config_table_matches_env_example() -> None:
    import subprocess
    import sys

    generated = subprocess.run(
        [sys.executable, "scripts/config_table.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert generated in (ROOT / "README.md").read_text()


def test_reliability_guarantees_name_tests_that_exist() -> None:
    doc = (ROOT / "docs/reliability.md").read_text()
    named = set(re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", doc))
    assert len(named) > 20

    def exists(path: str, name: str) -> bool:
        file = ROOT / path
        return file.exists() and (not name or re.search(rf"^(async )?def {name}\(", file.read_text(), re.M) is not None)

    assert sorted(f"{path}::{name}" for path, name in named if not exists(path, name)) == []
