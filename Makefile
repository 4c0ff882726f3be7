# respond: `make serve` and `make test` work on a fresh machine (Python 3.11+, a C compiler).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

NODE_CLIENTS := tests/clients/node
NODE_STAMP := $(NODE_CLIENTS)/node_modules/.installed

.PHONY: serve test lint install node-clients browser bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	@echo ">>> installing respond and its dependencies into $(VENV)"
	@echo ">>> llama-cpp-python is compiled from source the first time (about 6 minutes on 2 cores; cached by pip afterwards)"
	@$(PYTHON) tools/progress.py $(VENV)/install.log -- $(BIN)/python -m pip install -v -e '.[dev]'
	@touch $@

install: $(STAMP)

# The client programs the e2e tests drive (Codex CLI, Vercel AI SDK), pinned by the lockfile.
$(NODE_STAMP): $(NODE_CLIENTS)/package.json $(NODE_CLIENTS)/package-lock.json
	@echo ">>> installing the client programs under test (npm ci in $(NODE_CLIENTS))"
	@cd $(NODE_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node-clients: $(NODE_STAMP)

# Debian's Chromium, driven by playwright-core (tests/clients/node) in tests/e2e/test_playground.py.
# Playwright's own browser download cannot work offline; the distribution's package can.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(CHROMIUM):
	@echo ">>> installing Debian's chromium for the playground's browser tests"
	@$(SUDO) apt-get update -qq
	@DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium

browser: $(CHROMIUM)

serve: $(STAMP)
	$(BIN)/respond serve --host 127.0.0.1 --port 8080

lint: $(STAMP)
	$(BIN)/ruff check respond tests bench tools
	$(BIN)/ruff format --check respond tests bench tools
	$(BIN)/mypy

test: lint node-clients browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache $(NODE_CLIENTS)/node_modules
