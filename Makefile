# dflash.cpp - the two commands a user needs: `make run` and `make test`.
# Both install what they need (Debian packages, a Python venv) and are idempotent.

BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS   := cmake ninja-build g++ pkg-config libhwy-dev libcpp-httplib-dev nlohmann-json3-dev \
              libpcre2-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev python3-venv
PYTHON     ?= python3
VENV       := .venv
REF_VENV   := .venv-ref
DFLASH     := $(BUILD)/bin/dflash
# The model pair the repo ships (see models/README.md); `make run` uses it.
RUN_TARGET ?= models/dflash-pair/target
RUN_DRAFT  ?= models/dflash-pair/draft
RUN_PROMPT ?= def fibonacci(n):

.PHONY: all deps venv ref-venv build test run goldens bench clean

all: build

# Debian packages: installed only when one is missing, so repeated runs cost a dpkg query.
deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok:
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@mkdir -p $(BUILD) && touch $@

# Light venv for tests that drive us from Python (server tests, text goldens checks).
venv: $(VENV)/.ok
$(VENV)/.ok: tools/requirements.txt | deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r tools/requirements.txt
	@touch $@

# Heavy venv (torch, transformers, z-lab dflash) for golden files and training only; CI never needs it.
ref-venv: $(REF_VENV)/.ok
$(REF_VENV)/.ok: tools/requirements-ref.txt
	$(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/pip install -q --upgrade pip
	$(REF_VENV)/bin/pip install -q -r tools/requirements-ref.txt
	@touch $@

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build venv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

run: build
	@if [ -d $(RUN_TARGET) ]; then \
	  $(DFLASH) generate -m $(RUN_TARGET) -d $(RUN_DRAFT) --prompt "$(RUN_PROMPT)" -n 128 --compare; \
	else \
	  echo "shipped pair not found at $(RUN_TARGET); running the generated test fixture pair"; \
	  $(DFLASH) generate -m tests/fixtures/qwen3-tiny -d tests/fixtures/dflash-tiny --prompt-ids 1,2,3,4,5 -n 64 --compare; \
	fi

# Regenerate test fixtures and golden files from the reference libraries.
goldens: ref-venv
	$(REF_VENV)/bin/python tools/make_fixtures.py --out tests/fixtures

bench: build
	$(DFLASH) bench --help

clean:
	rm -rf $(BUILD)
