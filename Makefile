# respond: `make serve` and `make test` work on a fresh machine (Python 3.11+, a C compiler).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint install bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	@echo ">>> installing respond and its dependencies into $(VENV)"
	@echo ">>> llama-cpp-python is compiled from source the first time (about 6 minutes on 2 cores; cached by pip afterwards)"
	@$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	@touch $@

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/respond serve --host 127.0.0.1 --port 8080

lint: $(STAMP)
	$(BIN)/ruff check respond tests bench
	$(BIN)/ruff format --check respond tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
