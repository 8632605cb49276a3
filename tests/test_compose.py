"""docker-compose.yml and the image it builds stay in step with the native commands, .env.example and the
requirements (no Docker engine runs here)."""

import importlib
import re
from pathlib import Path

import yaml
from django.conf import settings

from researchsite.celery import app as celery_app

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = ["web", "worker", "beat", "flower"]


def command(service: str) -> str:
    value = SERVICES[service]["command"]
    return " ".join(value) if isinstance(value, list) else value


def test_compose_uses_the_native_entry_points() -> None:
    # the same settings module, ASGI application and Celery app as the native path and the tests
    assert settings.ASGI_APPLICATION == "researchsite.asgi.application"
    assert callable(importlib.import_module("researchsite.asgi").application)
    assert celery_app.main == "researchsite"
    for service in APP_SERVICES:
        assert SERVICES[service]["environment"]["DJANGO_SETTINGS_MODULE"] == "researchsite.settings"
    assert "daphne" in command("web") and "researchsite.asgi:application" in command("web")
    for service, verb in (("worker", "worker"), ("beat", "beat"), ("flower", "flower")):
        assert re.search(rf"celery -A researchsite {verb}\b", command(service)), service
    native = (ROOT / "Makefile").read_text() + (ROOT / "README.md").read_text()
    assert "researchsite.asgi:application" in native and "celery -A researchsite worker" in native
    assert "celery -A researchsite beat" in native


def test_compose_services_have_health_checks_and_safe_binds() -> None:
    for service in ("postgres", "redis", "searxng"):
        assert "healthcheck" in SERVICES[service], service
    for service in APP_SERVICES:
        assert SERVICES[service]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert SERVICES["flower"]["ports"] == ["${FLOWER_BIND:-127.0.0.1}:5555:5555"]
    assert "--basic-auth" in command("flower")
    assert SERVICES["ollama"]["profiles"] == ["local-model"]
    searx = yaml.safe_load((ROOT / "deploy/searxng/settings.yml").read_text())
    assert "json" in searx["search"]["formats"]
    # the app searches the stack's own SearxNG, whose secret comes from the environment
    assert SERVICES["worker"]["environment"]["SEARXNG_URL"] == "http://searxng:8080"
    assert SERVICES["searxng"]["environment"]["SEARXNG_SECRET"].startswith("${SEARXNG_SECRET:?")
    # the image writes its own files into /etc/searxng: mount the settings file alone, not the folder read-only
    assert SERVICES["searxng"]["volumes"] == ["./deploy/searxng/settings.yml:/etc/searxng/settings.yml:ro"]
    # workers scale (`--scale worker=4`): no fixed name or published port
    assert not {"ports", "container_name"} & set(SERVICES["worker"])
    for service in APP_SERVICES:
        assert SERVICES[service]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_every_variable_compose_passes_is_documented() -> None:
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    raw = (ROOT / "docker-compose.yml").read_text()
    interpolated = set(re.findall(r"\$\{([A-Z0-9_]+)", raw)) | set(re.findall(r"\$\$\{([A-Z0-9_]+)", raw))
    passed = set()
    for service in APP_SERVICES:
        passed |= set(SERVICES[service]["environment"])
    missing = (passed | interpolated) - documented
    assert missing == set(), f"not in .env.example: {sorted(missing)}"


def test_image_installs_the_runtime_requirements_only() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY requirements/ requirements/" in dockerfile
    assert re.findall(r"pip install .*-r (\S+)", dockerfile) == ["requirements/base.txt"]
    base = (ROOT / "requirements/base.txt").read_text().lower()
    for tool in ("pytest", "playwright", "ruff", "websocket-client", "pyyaml"):
        assert not re.search(rf"^{tool}\b", base, re.MULTILINE), tool
    assert "-r base.txt" in (ROOT / "requirements/dev.txt").read_text().splitlines()
    assert "-r requirements/dev.txt" in (ROOT / "requirements.txt").read_text().splitlines()
