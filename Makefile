# Everyday commands. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE_STAMP := $(VENV)/.requirements-base.stamp
DEV_STAMP := $(VENV)/.requirements-dev.stamp

.PHONY: demo test test-fast lint format venv dev services browser install-check migrate run worker beat flower bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file changed since the last install. `venv`: the runtime
# (requirements/base.txt), enough for the app and `make demo`; `dev`: that plus the test, lint and benchmark tools
# (requirements/dev.txt, which includes base.txt), for `make test`, `make lint` and `make bench`.
$(BASE_STAMP): requirements/base.txt | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/base.txt
	touch $@

$(DEV_STAMP): $(BASE_STAMP) requirements.txt $(wildcard requirements/*.txt)
	$(PY) -m pip install --quiet -r requirements/dev.txt
	touch $@

venv: $(BASE_STAMP)

dev: $(DEV_STAMP)

services: venv
	PY=$(PY) bash scripts/ensure-services.sh

# Debian's Chromium for the browser tests (tests/browser/); fails loudly when it cannot be installed.
browser:
	bash scripts/ensure-browser.sh

lint: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	SECRET_KEY=mypy-imports-the-settings-only $(VENV)/bin/mypy

format: dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The first command: a complete research, offline, on PostgreSQL + Redis if they answer, else embedded.
demo: venv
	DEMO_EXIT=$(DEMO_EXIT) $(PY) scripts/demo.py

# The runtime requirements installed with the pip a fresh Python 3.11 venv bundles, and the entry points imported
# (scripts/check-install.sh): what a deployment's `pip install -r requirements/base.txt` gets.
install-check:
	PYTHON=$(PYTHON) bash scripts/check-install.sh

# Test processes (pytest-xdist workers), each with a test database and a Redis db of its own
# (tests/support/testrun.py). `make test` runs pytest in two passes (scripts/test_passes.py): the unit and database
# lanes, which keep the CPUs busy, on TEST_FAST_WORKERS processes (no more than this machine's 2 cores), then the
# stack, browser and fault lanes, which mostly wait on processes and deadlines, on TEST_WORKERS. `make test-fast` is
# the first pass without the slow tests. PYTEST_ARGS comes last, so `-n 0` there runs each pass in one process.
TEST_WORKERS ?= 3
TEST_FAST_WORKERS ?= 2

# PostgreSQL and Redis: the machine's where they answer, else PostgreSQL and Valkey from the wheels, started for the
# run and stopped after it (scripts/with_servers.py).
test: dev browser lint install-check
	$(PY) scripts/with_servers.py $(PY) scripts/test_passes.py $(TEST_FAST_WORKERS) $(TEST_WORKERS) $(PYTEST_ARGS)

# The inner loop: the unit and database lanes without the slow tests (no worker processes, daphne, Chromium or
# fault injection, and no lint); the lanes: README.md, under `make test`. `make test` stays the full suite.
test-fast: dev
	$(PY) scripts/with_servers.py $(PY) -m pytest -n $(TEST_FAST_WORKERS) --dist worksteal \
		-m "(unit or database) and not slow" $(PYTEST_ARGS)

migrate: venv services
	$(PY) manage.py migrate

run: migrate
	$(VENV)/bin/daphne -b 127.0.0.1 -p 8000 researchsite.asgi:application

worker: venv
	$(VENV)/bin/celery -A researchsite worker -P threads -c 16 -l INFO

beat: venv
	mkdir -p var && $(VENV)/bin/celery -A researchsite beat -l INFO -s var/celerybeat-schedule

flower: venv
	$(VENV)/bin/celery -A researchsite flower --address=127.0.0.1 --port=5555 --basic-auth=$${FLOWER_BASIC_AUTH:?set FLOWER_BASIC_AUTH=user:password}

# Benchmarks on the real stack (about 20 minutes; not part of `make test`): docs/performance.md, docs/scaling.md.
# Options through BENCH_ARGS, e.g. make bench BENCH_ARGS="--parts critical --reps 5".
bench: dev services
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
