# dflash.cpp - the two commands a user needs: `make run` and `make test`.
# Both install what they need (Debian packages, a Python venv) and are idempotent, and build
# only what they use. Hostile-input checks (docs/fuzzing.md): `make asan`, `make fuzz`,
# `make fuzz-long`.

BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS   := cmake ninja-build g++ pkg-config libhwy-dev libcpp-httplib-dev nlohmann-json3-dev \
              libpcre2-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev python3-venv
# The sanitizer build of the test suite and the libFuzzer build (clang 16: clang 14 lacks
# _Float16 on x86). -O1: sanitizer builds compile faster and report exact lines.
ASAN_BUILD   ?= build-asan
FUZZ_BUILD   ?= build-fuzz
FUZZ_CXX     ?= clang++-16
FUZZ_PKGS    := clang-16 libclang-rt-16-dev
FUZZ_SECONDS ?= 30
SANITIZED    := -DDFLASH_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g"
PYTHON     ?= python3
VENV       := .venv
REF_VENV   := .venv-ref
DFLASH     := $(BUILD)/bin/dflash
# The model pair the repo ships (see models/README.md); `make run` uses it.
RUN_TARGET ?= models/dflash-pair/target
RUN_DRAFT  ?= models/dflash-pair/draft
RUN_PROMPT ?= def fibonacci(n):

.PHONY: all deps venv ref-venv configure build test run goldens bench asan fuzz fuzz-long fuzz-build clean

all: build

# Debian packages: installed only when one is missing, so repeated runs cost a dpkg query.
define apt_install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef
deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok:
	$(call apt_install,$(APT_PKGS))
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

# Each goal builds its own targets only: the microbenchmarks are for `make bench`.
configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS) --target dflash

test: configure venv
	@cmake --build $(BUILD) -j $(JOBS) --target dflash dflash_tests
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole test suite (GoogleTest and pytest, which drives the sanitized dflash binary) under
# ASan + UBSan; any report fails its test.
asan: deps venv
	@cmake -S . -B $(ASAN_BUILD) -G Ninja $(SANITIZED) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target dflash dflash_tests
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz-build: deps
	$(call apt_install,$(FUZZ_PKGS))
	@cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DDFLASH_FUZZ=ON $(SANITIZED) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target dflash_fuzzers

# Each target: its reproductions of known crashes, then FUZZ_SECONDS from the seeds (fixed seed).
fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) fresh

# A long session that keeps what it found: make fuzz-long FUZZ_SECONDS=3600 [FUZZ_TARGETS=mlx]
fuzz-long: fuzz-build
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) keep $(FUZZ_TARGETS)

run: build
	@if [ -d $(RUN_TARGET) ]; then \
	  $(DFLASH) generate -m $(RUN_TARGET) -d $(RUN_DRAFT) --prompt "$(RUN_PROMPT)" -n 128 --compare && \
	  echo && echo "With a real pair (README, 'Getting a real pair'):" && \
	  echo "  $(DFLASH) generate -m ~/models/Qwen3-4B -d ~/models/Qwen3-4B-DFlash-b16 --target-quant q8_0 --chat --prompt 'Write a quicksort in Python' -n 256 --compare"; \
	else \
	  echo "shipped pair not found at $(RUN_TARGET); running the generated test fixture pair"; \
	  $(DFLASH) generate -m tests/fixtures/qwen3-tiny -d tests/fixtures/dflash-tiny --prompt-ids 1,2,3,4,5 -n 64 --compare; \
	fi

# Regenerate test fixtures and golden files from the reference libraries.
goldens: ref-venv
	$(REF_VENV)/bin/python tools/make_fixtures.py --out tests/fixtures

bench: configure
	@cmake --build $(BUILD) -j $(JOBS) --target dflash dflash_microbench
	$(DFLASH) bench --help

clean:
	rm -rf $(BUILD)
