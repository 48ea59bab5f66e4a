# Gatehouse: `make run` serves the product, `make prod` the production layout (TLS, several
# processes, PostgreSQL and Redis), `make test` runs everything.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export DJANGO_SETTINGS_MODULE := gatehouse.settings

.PHONY: run prod test test-all lint typecheck bench bench-quick screenshots migrate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.run-deps: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev-deps: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $(VENV)/.run-deps $@

migrate: $(VENV)/.run-deps
	@mkdir -p var
	$(BIN)/python manage.py migrate --noinput -v 0
	$(BIN)/python manage.py ensure_admin

run: migrate
	$(BIN)/python manage.py gatehouse_banner --host $(HOST) --port $(PORT)
	@# One process on its own: it sweeps its own deadlines. Several processes run
	@# `manage.py run_sweeper` beside them instead (docs/OPERATIONS.md).
	@# gatehouse.serve is Daphne with a bound on what a socket may hold unsent, and a drain
	@# on Ctrl-C that lets a waiting hook call have its answer (5 s here; a second Ctrl-C stops).
	GATEHOUSE_INPROCESS_SWEEPER=1 GATEHOUSE_DRAIN_SECONDS=$${GATEHOUSE_DRAIN_SECONDS:-5} \
		$(BIN)/python -m gatehouse.serve -b $(HOST) -p $(PORT) gatehouse.asgi:application

# Caddy (TLS on PORT, default 8443) in front of WORKERS Daphne processes, the sweeper and
# the Telegram bot under honcho. Needs DATABASE_URL and REDIS_URL. See docs/DEPLOY.md.
prod: $(VENV)/.run-deps
	@mkdir -p var
	BIN=$(BIN) PORT=$(if $(filter file,$(origin PORT)),8443,$(PORT)) scripts/prod.sh

lint: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

test: $(VENV)/.dev-deps
	scripts/test.sh

# Everything `make test` runs, plus the smoke runs of the benchmark and soak scripts.
test-all: $(VENV)/.dev-deps
	GATEHOUSE_TEST_ALL=1 scripts/test.sh

bench: $(VENV)/.dev-deps
	$(BIN)/python -m bench

bench-quick: $(VENV)/.dev-deps
	$(BIN)/python -m bench --quick

screenshots: $(VENV)/.dev-deps
	scripts/test-services.sh $(BIN)/python -m tests.e2e.screenshots

clean:
	rm -rf $(VENV) var
