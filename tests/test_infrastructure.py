"""The test run uses the real services: PostgreSQL for the database, Redis for Celery and the channel layer."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from researchsite.celery import app as celery_app

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_database_is_postgresql_of_this_run() -> None:
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("select current_database(), version()")
        name, version = cursor.fetchone()
    assert name == settings.DATABASES["default"]["TEST"]["NAME"]
    assert version.startswith("PostgreSQL")


def test_channel_layer_is_redis_and_delivers() -> None:
    # given
    layer = get_channel_layer()
    assert type(layer).__module__ == "channels_redis.core"
    channel = async_to_sync(layer.new_channel)()
    # when
    async_to_sync(layer.send)(channel, {"type": "ping", "n": 1})
    # then
    assert async_to_sync(layer.receive)(channel) == {"type": "ping", "n": 1}


def test_celery_broker_is_this_runs_redis_db() -> None:
    assert celery_app.conf.broker_url == settings.REDIS_URL
    assert settings.REDIS_URL.startswith("redis://") and not settings.REDIS_URL.endswith("/0")
    assert celery_app.conf.task_acks_late is True
    assert celery_app.conf.worker_prefetch_multiplier == 1
    assert celery_app.conf.task_always_eager is False


def test_celery_workers_reuse_database_connections() -> None:
    from celery.fixups.django import DjangoWorkerFixup

    # the fixup reads this from the app's configuration; an environment variable alone never reached it
    assert DjangoWorkerFixup(celery_app).db_reuse_max == 1000


def _run_django(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "researchsite.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MAX_BREADTH", "many"),
        ("MAX_DEPTH", "0"),
        ("DEBUG", "perhaps"),
        ("REDIS_URL", "http://not-redis"),
        ("SCRAPE_ALLOWED_PRIVATE_HOSTS", "127.0.0.1"),
        ("SCRAPE_ALLOWED_PRIVATE_HOSTS", "web/collection/"),
        ("OPENAI_BASE_URL", "ftp://x"),
        ("LOG_LEVEL", "LOUD"),
        ("DATABASE_URL", "mysql://user@db/deepresearch"),
        ("REDIS_URL", ""),
        ("DATABASE_URL", "sqlite:///db.sqlite3"),
        ("RESEARCH_ENGINE", "magic"),
        ("DB_LOCK_TIMEOUT", "60"),
        ("SECRET_KEY", "change-me-to-a-long-random-string"),
        ("FLOWER_BASIC_AUTH", "admin:change-me"),
        ("SEARXNG_SECRET", "change-me-to-another-long-random-string"),
    ],
)
def test_settings_bad_value_names_the_variable(variable: str, value: str) -> None:
    result = _run_django({variable: value}, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert variable in result.stderr


def test_settings_accept_a_copied_env_example_with_its_secrets_set() -> None:
    # given .env.example as `cp .env.example .env` leaves it, with the secrets it asks for set
    example = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            example[name] = value
    example["SECRET_KEY"] = "p9T!x2mQ#v8Lr4Zs7Wc1Nf6Hb3Jd0Ky5Ue8Ga2Xo4Ri7Pl1Mq9Vt3Sw6Bn0Cz"
    example["FLOWER_BASIC_AUTH"] = "ops:Wc1Nf6Hb3Jd0Ky5Ue8Ga2X"
    example["SEARXNG_SECRET"] = "Lr4Zs7Wc1Nf6Hb3Jd0Ky5Ue8Ga2Xo4Ri7Pl1Mq9Vt3"
    for service in ("DATABASE_URL", "REDIS_URL"):  # the services of this run, not the documented defaults
        example[service] = os.environ.get(service, example[service])
    # when / then
    result = _run_django(example, "check")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no issues" in result.stdout


def test_settings_narrow_the_apps_own_endpoint_to_its_collection() -> None:
    # given the app's own address allowed whole, beside a bare and a path-scoped private endpoint
    env = {"APP_BASE_URL": "http://web:8000", "SCRAPE_ALLOWED_PRIVATE_HOSTS": "web:8000,Docs.Internal:443,files:80/pub"}
    script = "from django.conf import settings; print(sorted(settings.SCRAPE_ALLOWED_PRIVATE_HOSTS))"
    # when the settings are read
    result = _run_django(env, "shell", "-c", script)
    # then the app is reachable for its collection documents only; the others as listed
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == str(["docs.internal:443", "files:80/pub/", "web:8000/collection/"])


def test_settings_unix_socket_redis_url_is_accepted() -> None:
    result = _run_django({"REDIS_URL": "unix:///run/redis/redis.sock", "CELERY_BROKER_URL": "memory://"}, "check")
    assert result.returncode == 0, result.stderr[-2000:]


def test_settings_secret_key_required_without_debug() -> None:
    result = _run_django({"DEBUG": "false", "SECRET_KEY": ""}, "check")
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_check_deploy_passes_with_production_settings() -> None:
    production = {
        "DEBUG": "false",
        "SECRET_KEY": "p9T!x2mQ#v8Lr4Zs7Wc1Nf6Hb3Jd0Ky5Ue8Ga2Xo4Ri7Pl1Mq9Vt3Sw6Bn0Cz",
        "ALLOWED_HOSTS": "research.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://research.example.com",
        "SECURE_SSL_REDIRECT": "",
        "SESSION_COOKIE_SECURE": "",
        "CSRF_COOKIE_SECURE": "",
        "SECURE_HSTS_SECONDS": "",
    }
    result = _run_django(production, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_control_steps_are_routed_to_their_own_queue() -> None:
    app = celery_app

    def queue_of(name: str) -> str:
        return app.amqp.router.route({}, name, (), {})["queue"].name

    for name in (
        "generate_followups_task",
        "start_research_task",
        "plan_queries_task",
        "write_report_task",
        "sweep_task",
    ):
        assert queue_of(f"workers.tasks.{name}") == "control", name
    for name in ("run_query_task", "scrape_website_task", "analyze_website_task"):
        assert queue_of(f"workers.tasks.{name}") == "celery", name
    # a worker started with no -Q consumes both
    assert {queue.name for queue in app.amqp.queues.values()} >= {"celery", "control"}


def test_the_web_process_keeps_no_database_connection() -> None:
    probe = (
        "import researchsite.asgi; from django.db import connection; print(connection.settings_dict['CONN_MAX_AGE'])"
    )
    env = {**os.environ, "DB_CONN_MAX_AGE": "60", "DJANGO_SETTINGS_MODULE": "researchsite.settings"}
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
