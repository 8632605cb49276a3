"""Django settings, all read from the environment (documented in .env.example)."""

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from researchsite.env import (
    env_bool,
    env_choice,
    env_float,
    env_host_ports,
    env_int,
    env_list,
    env_prices,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)

SECRET_KEY = env_str("SECRET_KEY")
if not DEBUG and SECRET_KEY.startswith("change-me"):
    raise ImproperlyConfigured("SECRET_KEY is still the placeholder of .env.example; set a long random string")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "insecure-development-key-only-for-debug-mode-" + "x" * 20
# Flower's password and the compose SearxNG's secret are not Django settings, but every app process loads this
# module (Flower through the Celery app, and compose hands .env to all of them), so their .env.example
# placeholders, which are public, are refused here as SECRET_KEY's is.
if not DEBUG and env_str("FLOWER_BASIC_AUTH").partition(":")[2].startswith("change-me"):
    raise ImproperlyConfigured("FLOWER_BASIC_AUTH still has the password of .env.example; choose another")
if not DEBUG and env_str("SEARXNG_SECRET").startswith("change-me"):
    raise ImproperlyConfigured("SEARXNG_SECRET is still the placeholder of .env.example; set a long random string")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "research",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A Content-Security-Policy on every response, static files included (research/web/middleware.py).
    "research.web.middleware.ContentSecurityPolicyMiddleware",
    # Static files served by the app itself (WhiteNoise), under daphne as in production.
    "research.web.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Uploads over UPLOAD_MAX_BYTES refused (413) before the CSRF check parses them (research/web/middleware.py).
    "research.web.middleware.UploadLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # `Authorization: Bearer <token>` on /api/: the token's owner instead of the session's user, no CSRF
    # check (no cookie), read-only tokens refused anything but reading (research/web/middleware.py).
    "research.web.middleware.BearerTokenMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "researchsite.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "researchsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/deepresearch"
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must be a postgres:// URL")
# PostgreSQL ends every statement and every wait for a lock after these many seconds (0 = no limit): a stuck
# query, or a row held by a stuck transaction, raises OperationalError, which tasks retry like any database hiccup.
DB_STATEMENT_TIMEOUT = env_int("DB_STATEMENT_TIMEOUT", 30, minimum=0)
DB_LOCK_TIMEOUT = env_int("DB_LOCK_TIMEOUT", 10, minimum=0)
# PostgreSQL ends a session left idle inside a transaction this long (0 = never): a worker on a host cut off from the
# network mid-transaction keeps its session open on the server, and with it the rows it locked, until this ends it.
DB_IDLE_IN_TRANSACTION_TIMEOUT = env_int("DB_IDLE_IN_TRANSACTION_TIMEOUT", 60, minimum=0)
# The hot paths' hand-written statements are prepared on each connection (research/record/database.py prepared_cursor).
# Off for a pooler in transaction mode that cannot keep prepared statements (PgBouncer before 1.21).
DB_PREPARED_STATEMENTS = env_bool("DB_PREPARED_STATEMENTS", True)
if DB_STATEMENT_TIMEOUT and DB_LOCK_TIMEOUT >= DB_STATEMENT_TIMEOUT:
    raise ImproperlyConfigured("DB_LOCK_TIMEOUT must be below DB_STATEMENT_TIMEOUT, which would end the wait first")
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = env_int("DB_CONNECT_TIMEOUT", 10)
# Sent as server options when connecting, so every connection has them from its first statement; none at all when
# both are off, for poolers that refuse startup options.
_limits = {
    "statement_timeout": DB_STATEMENT_TIMEOUT,
    "lock_timeout": DB_LOCK_TIMEOUT,
    "idle_in_transaction_session_timeout": DB_IDLE_IN_TRANSACTION_TIMEOUT,
}
_server_options = " ".join(f"-c {name}={seconds * 1000}" for name, seconds in _limits.items() if seconds)
if _server_options:
    _given = DATABASES["default"]["OPTIONS"].get("options", "")  # ?options=... in DATABASE_URL
    DATABASES["default"]["OPTIONS"]["options"] = f"{_given} {_server_options}".strip()
# psycopg prepares a statement the second time a connection runs it; Django's default cursors, which bind
# parameters on the client, never prepare, so only the cursors of prepared_cursor() do.
DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 1 if DB_PREPARED_STATEMENTS else None
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: Celery broker and the Channels layer --------------------------------------------------------
# Redis carries the tasks, the live updates between processes, the fleet-wide rate limits and what workers learn
# of the model server.
REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss", "unix"))
if not REDIS_URL:
    raise ImproperlyConfigured("REDIS_URL must name a Redis (or Valkey) server")

# The broker: REDIS_URL unless another Redis is named.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {
    # A message not acked within this window is redelivered; it must exceed the longest task (the report).
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60),
    # A Redis that accepts connections and never answers must not hold a step at its publish forever.
    "socket_timeout": 30,
    "socket_connect_timeout": 10,
}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# Late acks plus a prefetch of one: a task killed mid-way is redelivered, and a busy worker hoards nothing.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# No task time limits: Celery enforces them in its prefork and gevent pools only, and the workers run the threads
# pool. A task is bounded instead by the deadlines of its network calls and the database's statement and lock
# timeouts (docs/reliability.md, "Time limits").
# Task events (a message to Redis per task received, started and finished, and per task sent) are what Flower
# shows of tasks; each costs the sending process a publish. Off unless asked for: Flower, run with its default
# --enable_events, switches them on in every worker every 5 s while it runs (remote control), so its task views
# fill from the moment it starts; true also sends them from start-up and adds the "sent" state, which only the
# publishing process can send (docs/performance.md: the workers' CPU per task).
TASK_EVENTS = env_bool("TASK_EVENTS", False)
CELERY_WORKER_SEND_TASK_EVENTS = TASK_EVENTS
CELERY_TASK_SEND_SENT_EVENT = TASK_EVENTS
CELERY_TASK_ALWAYS_EAGER = False
# Control steps (follow-up questions, start, planning, report, sweep) have a queue of their own, so they never wait
# behind thousands of scrapes and analyses. A worker consumes every queue listed here and takes from each in turn.
CELERY_TASK_DEFAULT_QUEUE = "celery"
# Each queue with its own routing key: with the default key both would be bound to it, and get every message.
CELERY_TASK_QUEUES = (Queue("celery", routing_key="celery"), Queue("control", routing_key="control"))
# Each step's queue ("control" for the short steps every research waits on, "celery" for the rest), from the
# step registry (workers/steps.py); Celery imports the router when it routes the first message.
CELERY_TASK_ROUTES = ("workers.steps.route",)
# Celery's Django fixup closes the DB connection around every task unless told to reuse it (measured: 7.2 ms vs
# 1.5 ms per DB-writing task). It reads this from the app's configuration, not from the environment.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000, minimum=0)
# Extra modules every worker imports at start, comma-separated (instrumentation: the benchmark's statement and
# Redis command counters, bench/instrument.py). Empty in production.
CELERY_IMPORTS = env_list("CELERY_IMPORTS")

# Seconds over which one process gathers a research's events into one websocket push (coalesced pushes).
PUSH_INTERVAL = env_float("PUSH_INTERVAL", 1.0, minimum=0.0)
# Each push carries only what changed (a delta); with this on it also carries a checksum of the whole snapshot read
# in the same view, so a client can verify that applying the delta gives exactly that snapshot. It doubles the
# pusher's reads: meant for tests and for diagnosing a client that drifts.
PUSH_CHECKSUMS = env_bool("PUSH_CHECKSUMS", False)

# Live updates travel between processes through Redis (channels_redis).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 60},
    }
}

# --- Search, LLM, scraping ------------------------------------------------------------------------------
# Empty: no SearxNG (with SEARCH_PROVIDERS=auto, research then searches the local document collection).
SEARXNG_URL = env_url("SEARXNG_URL", "")
# Which search providers a query goes to: auto (SearxNG if configured, else the local collection), or a
# comma-separated list of searxng and local ("searxng,local": the web and my documents).
_providers = env_list("SEARCH_PROVIDERS", "auto")
if _providers == ["auto"]:
    _providers = ["searxng"] if SEARXNG_URL else ["local"]
if not _providers or set(_providers) - {"searxng", "local"}:
    raise ImproperlyConfigured(f"SEARCH_PROVIDERS must be auto or a list of searxng, local; got {_providers}")
if "searxng" in _providers and not SEARXNG_URL:
    raise ImproperlyConfigured("SEARCH_PROVIDERS includes searxng but SEARXNG_URL is not set")
SEARCH_PROVIDERS = _providers
SEARCH_TIMEOUT = env_float("SEARCH_TIMEOUT", 20.0, minimum=1.0)
SEARCH_RESULTS_PER_QUERY = env_int("SEARCH_RESULTS_PER_QUERY", 7, minimum=1, maximum=20)
SEARCH_MAX_RETRIES = env_int("SEARCH_MAX_RETRIES", 4, minimum=0, maximum=20)
# Seconds one search may take in all, retries and backoff included.
SEARCH_DEADLINE = env_float("SEARCH_DEADLINE", 120.0, minimum=1.0)

OPENAI_BASE_URL = env_url("OPENAI_BASE_URL", "https://api.openai.com/v1")
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
# llm (the OpenAI-compatible model), extractive (no model: queries from key phrases, the pages' own sentences as
# facts and report), or auto: llm when OPENAI_API_KEY or OPENAI_BASE_URL is set, else extractive.
RESEARCH_ENGINE = env_choice("RESEARCH_ENGINE", "auto", ("auto", "llm", "extractive"))
if RESEARCH_ENGINE == "auto":
    RESEARCH_ENGINE = "llm" if OPENAI_API_KEY or env_str("OPENAI_BASE_URL") else "extractive"
# The address workers use to fetch the local document collection from the web app (links the local search
# provider hands out are signed, so only they work). Add its host:port/collection/ to SCRAPE_ALLOWED_PRIVATE_HOSTS.
APP_BASE_URL = env_url("APP_BASE_URL", "http://127.0.0.1:8000")
# Seconds a collection link is accepted after it was signed; workers renew a stored link when they fetch it.
COLLECTION_LINK_MAX_AGE = env_int("COLLECTION_LINK_MAX_AGE", 3600, minimum=60)
# Document uploads (research/collection/uploads.py): bytes of one upload request (its files, a zip included),
# refused with 413 before it is parsed; documents one upload may add (each file, each file of a zip).
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 50 * 1024 * 1024, minimum=10_000)
UPLOAD_MAX_FILES = env_int("UPLOAD_MAX_FILES", 200, minimum=1, maximum=10_000)
# Django's own count of the files in one request, to the same limit: above it, parsing stops (a 413 here).
DATA_UPLOAD_MAX_NUMBER_FILES = UPLOAD_MAX_FILES
LLM_MODEL = env_str("LLM_MODEL") or "gpt-4o-mini"
LLM_AGENTS = ("prompt_analyzer", "query_generator", "website_analyzer", "report_writer", "evaluator", "memory")
LLM_AGENT_MODELS = {agent: env_str(f"LLM_MODEL_{agent.upper()}") or LLM_MODEL for agent in LLM_AGENTS}
# The model's context window in tokens (0: ask the server: vLLM's /v1/models, llama.cpp's /props, Ollama's
# /api/ps and /api/show; else learn it from the server's context-length error). Every prompt is cut to fit it with
# room for the answer. LLM_CONTEXT_TOKENS_<AGENT> for an agent whose model has another window.
LLM_CONTEXT_TOKENS = env_int("LLM_CONTEXT_TOKENS", 0, minimum=0)
LLM_CONTEXT_TOKENS_AGENTS = {
    agent: env_int(f"LLM_CONTEXT_TOKENS_{agent.upper()}", 0, minimum=0)
    for agent in LLM_AGENTS
    if env_int(f"LLM_CONTEXT_TOKENS_{agent.upper()}", 0, minimum=0)
}
# Dollars per million prompt (input) and completion (output) tokens. LLM_PRICES (JSON) adds models or replaces
# these; a model missing here has an unknown cost, and a research using it cannot take a dollar budget.
LLM_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    **env_prices("LLM_PRICES"),
}
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 120.0, minimum=1.0)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 5, minimum=0, maximum=20)
LLM_INVALID_OUTPUT_RETRIES = env_int("LLM_INVALID_OUTPUT_RETRIES", 2, minimum=0, maximum=10)
# Seconds one model call may take in all: attempts, backoff between them and re-asks for invalid output.
LLM_CALL_DEADLINE = env_float("LLM_CALL_DEADLINE", 300.0, minimum=1.0)
# Seconds the follow-up questions request waits for a worker to write them; past that it answers 202 and the
# questions arrive in the snapshot and over the websocket (the model call itself has LLM_CALL_DEADLINE).
QUESTIONS_WAIT_SECONDS = env_float("QUESTIONS_WAIT_SECONDS", 20.0, minimum=0.0)
# Hours a research whose follow-up questions were asked but which was never started is kept (the sweeper deletes it).
DRAFT_MAX_AGE_HOURS = env_int("DRAFT_MAX_AGE_HOURS", 72, minimum=1)
# A plan waiting for its review this long after it was ready is cancelled: an active research counts against the
# user's limit of active researches, and one nobody approves would hold its place for ever.
PLAN_REVIEW_MAX_AGE_HOURS = env_int("PLAN_REVIEW_MAX_AGE_HOURS", 72, minimum=1)

# host:port reaches the endpoint on every hop; host:port/path/ only under that path, and only as the URL a fetch
# starts from, never through a redirect (workers/clients/fetch.py). The web app's own endpoint is only ever
# fetched for collection documents, so it is narrowed to that however it is listed.
SCRAPE_ALLOWED_PRIVATE_HOSTS = env_host_ports("SCRAPE_ALLOWED_PRIVATE_HOSTS")
if APP_BASE_URL:
    _app = urlsplit(APP_BASE_URL)
    _app_endpoint = f"{(_app.hostname or '').lower()}:{_app.port or (443 if _app.scheme == 'https' else 80)}"
    if _app_endpoint in SCRAPE_ALLOWED_PRIVATE_HOSTS:
        SCRAPE_ALLOWED_PRIVATE_HOSTS = (SCRAPE_ALLOWED_PRIVATE_HOSTS - {_app_endpoint}) | {
            f"{_app_endpoint}/collection/"
        }
SCRAPE_MAX_BYTES = env_int("SCRAPE_MAX_BYTES", 5_000_000, minimum=10_000)
SCRAPE_DEADLINE = env_float("SCRAPE_DEADLINE", 20.0, minimum=1.0)
# A PDF with more pages fails (too_many_pages); its bytes count against SCRAPE_MAX_BYTES like any page's.
SCRAPE_PDF_MAX_PAGES = env_int("SCRAPE_PDF_MAX_PAGES", 50, minimum=1)

# --- Limits ---------------------------------------------------------------------------------------------
MAX_BREADTH = env_int("MAX_BREADTH", 10, minimum=1, maximum=50)
MAX_DEPTH = env_int("MAX_DEPTH", 5, minimum=1, maximum=10)

# --- Adaptive research -----------------------------------------------------------------------------------
# The score (1-10) at which an adaptive branch has answered its objective and stops (from its min_depth on).
ADAPTIVE_QUALITY_THRESHOLD = env_int("ADAPTIVE_QUALITY_THRESHOLD", 7, minimum=1, maximum=10)
# A branch whose score improved by less than this over its parent's stops: going deeper no longer pays.
ADAPTIVE_MIN_IMPROVEMENT = env_float("ADAPTIVE_MIN_IMPROVEMENT", 0.5, minimum=0.0)
# Rounds of gap-filling branches the research-level evaluation may add before the report.
ADAPTIVE_MAX_GAP_ROUNDS = env_int("ADAPTIVE_MAX_GAP_ROUNDS", 2, minimum=0, maximum=10)
MAX_FOLLOWUP_QUESTIONS = env_int("MAX_FOLLOWUP_QUESTIONS", 10, minimum=1, maximum=50)
MAX_PROMPT_CHARS = env_int("MAX_PROMPT_CHARS", 10_000, minimum=100)
MAX_ANSWER_CHARS = env_int("MAX_ANSWER_CHARS", 5_000, minimum=10)
# Celery-level retries of a task whose client already gave up on a transient error (search, LLM).
TASK_MAX_RETRIES = env_int("TASK_MAX_RETRIES", 3, minimum=0, maximum=20)
# --- Budgets (research/control/budgets.py) ----------------------------------------------------------------------
# The budget a research gets for each key its start does not give: seconds it may run, tokens (prompt +
# completion) and dollars it may spend; 0 = none. Reaching one stops the research with a partial report.
RESEARCH_TIME_BUDGET = env_int("RESEARCH_TIME_BUDGET", 7200, minimum=5)
RESEARCH_TOKEN_BUDGET = env_int("RESEARCH_TOKEN_BUDGET", 20_000_000, minimum=0)
RESEARCH_USD_BUDGET = env_float("RESEARCH_USD_BUDGET", 0.0, minimum=0.0)
# The share of a token or dollar budget held back for the report: the steps stop when the rest is spent.
BUDGET_REPORT_SHARE = min(env_float("BUDGET_REPORT_SHARE", 0.25, minimum=0.0), 0.9)
# The largest budget a start may ask for, per key.
MAX_BUDGET_SECONDS = env_int("MAX_BUDGET_SECONDS", 86_400, minimum=5)
MAX_BUDGET_TOKENS = env_int("MAX_BUDGET_TOKENS", 100_000_000, minimum=1)
MAX_BUDGET_USD = env_float("MAX_BUDGET_USD", 100.0, minimum=0.01)
# ---------------------------------------------------------------------------------------------------------
# Researches one user may have queued or running at once.
MAX_ACTIVE_RESEARCH_PER_USER = env_int("MAX_ACTIVE_RESEARCH_PER_USER", 3, minimum=1)

# --- Recovery (docs/reliability.md) ---------------------------------------------------------------------
# A step's lease, renewed by its worker's heartbeat every quarter of it: a lease not renewed for this long is a
# dead worker's, and the sweeper runs the step again elsewhere.
LEASE_SECONDS = env_int("LEASE_SECONDS", 60, minimum=2)
# A step waiting in the queue this long is published again (its message may be lost); queue time is no attempt.
QUEUE_GRACE_SECONDS = env_int("QUEUE_GRACE_SECONDS", 600, minimum=1)
# After this many lapsed leases (workers that took the step up and died) the step is failed with its reason.
MAX_ATTEMPTS = env_int("MAX_ATTEMPTS", 3, minimum=1, maximum=20)
# The host name in the leases this process takes (its workers' names say where a step ran); default: the machine's.
WORKER_HOST = env_str("WORKER_HOST")
# Seconds between two sweeps (Celery beat).
SWEEP_INTERVAL = env_float("SWEEP_INTERVAL", 15.0, minimum=0.5)
# Seconds between two looks for due schedules and webhooks to call (Celery beat; research/control/schedules.py).
SCHEDULE_TICK = env_float("SCHEDULE_TICK", 30.0, minimum=0.5)
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "workers.tasks.sweep_task", "schedule": SWEEP_INTERVAL},
    "schedules": {"task": "workers.tasks.run_schedules_task", "schedule": SCHEDULE_TICK},
}
# The shortest interval a schedule given in seconds may have ("daily", "weekly" and cron lines are always allowed).
SCHEDULE_MIN_INTERVAL = env_int("SCHEDULE_MIN_INTERVAL", 3600, minimum=1)
# Seconds a webhook call may take; it is tried this many times in all, a few seconds apart.
WEBHOOK_TIMEOUT = env_float("WEBHOOK_TIMEOUT", 10.0, minimum=0.5)
WEBHOOK_ATTEMPTS = env_int("WEBHOOK_ATTEMPTS", 3, minimum=1, maximum=10)
# A webhook call connects only to public addresses, as a fetch does; these host:port endpoints are let through.
WEBHOOK_ALLOWED_PRIVATE_HOSTS = frozenset(
    entry.partition("/")[0] for entry in env_host_ports("WEBHOOK_ALLOWED_PRIVATE_HOSTS")
)

# --- Rate limits shared by all workers through Redis (0 = no limit) ------------------------------------
LLM_RATE_LIMIT = env_float("LLM_RATE_LIMIT", 20.0, minimum=0.0)
SEARCH_RATE_LIMIT = env_float("SEARCH_RATE_LIMIT", 5.0, minimum=0.0)
# Pages fetched at once from one host, across all workers.
SCRAPE_PER_HOST_CONCURRENCY = env_int("SCRAPE_PER_HOST_CONCURRENCY", 4, minimum=0)
# Token budgets for what goes into one prompt, at most: each is cut further to fit the model's context window.
PAGE_TOKEN_BUDGET = env_int("PAGE_TOKEN_BUDGET", 6000, minimum=200)
# A longer page is analysed in parts of that size, at most this many, spread over the whole page.
PAGE_MAX_PARTS = env_int("PAGE_MAX_PARTS", 4, minimum=1, maximum=20)
LEARNINGS_TOKEN_BUDGET = env_int("LEARNINGS_TOKEN_BUDGET", 3000, minimum=100)
REPORT_TOKEN_BUDGET = env_int("REPORT_TOKEN_BUDGET", 60000, minimum=1000)
# Request bodies above this are refused with 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 262_144, minimum=10_000)

# --- Accounts -------------------------------------------------------------------------------------------
ALLOW_SIGNUP = env_bool("ALLOW_SIGNUP", False)
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Quotas and request rates per user (research/control/quotas.py; 0 = none) -----------------------------------
# What one user's model calls may spend over the last 24 hours, in tokens (prompt + completion) and in dollars
# (priced calls only); at either, the endpoints that spend answer 429 until enough of it ages out.
USER_DAILY_TOKEN_QUOTA = env_int("USER_DAILY_TOKEN_QUOTA", 0, minimum=0)
USER_DAILY_USD_QUOTA = env_float("USER_DAILY_USD_QUOTA", 0.0, minimum=0.0)
# Requests a minute one user may make to the endpoints that spend (questions, start, retry).
SPEND_RATE_LIMIT = env_int("SPEND_RATE_LIMIT", 30, minimum=0)
# Failed sign-ins per LOGIN_RATE_WINDOW seconds, per username and per client address, before sign-in answers 429.
LOGIN_RATE_LIMIT = env_int("LOGIN_RATE_LIMIT", 10, minimum=0)
LOGIN_RATE_WINDOW = env_int("LOGIN_RATE_WINDOW", 900, minimum=1)
# Views of shared reports (/share/<key>/) per minute from one client address, a right key or a wrong one: the links
# are unguessable, and this keeps anyone from trying many.
SHARE_RATE_LIMIT = env_int("SHARE_RATE_LIMIT", 60, minimum=1)
# The longest a share link may be given to live (expires_in, seconds): a year.
MAX_SHARE_SECONDS = 365 * 24 * 3600

# --- Security -------------------------------------------------------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REFERRER_POLICY = "same-origin"
# Workers fetch collection documents from the web app over the internal network (compose: http://web:8000), where
# there is no TLS; those links are signed (research/collection/documents.py), so plain HTTP exposes nothing.
SECURE_REDIRECT_EXEMPT = [r"^collection/"]

# --- I18n, static ---------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE") or "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise serves collectstatic's STATIC_ROOT (the docker image runs collectstatic) and, without it, the apps'
# static folders directly, indexed once at start-up; so a native `daphne` run needs no collectstatic step.
WHITENOISE_USE_FINDERS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")).upper(),
    },
    # httpx logs every request line, including URLs; the LLM client logs what matters itself.
    "loggers": {"httpx": {"level": "WARNING"}, "openai": {"level": "WARNING"}},
}

CSRF_FAILURE_VIEW = "research.web.views.csrf_failure"
