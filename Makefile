# `make demo` and `make test` set up everything they need on a fresh Debian/Ubuntu machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .tools
UV := $(TOOLS)/bin/uv
export PATH := $(CURDIR)/$(TOOLS)/bin:$(PATH)
# Python writes its bytecode caches (__pycache__, ignored by git), pytest its rewritten test
# modules among them: where PYTHONDONTWRITEBYTECODE is set, each pytest process compiled
# every test module again (15 s of CPU instead of 5.5) and each command it ran its modules.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test check static parallel-tests timed-tests setup system-deps system-deps-test build lint clean

demo: system-deps build
	$(PY) -m pinchpoint demo

# The tests' own time is printed at the end, setup (installs, builds) excluded.
test: system-deps-test build
	cargo test $(CRATES) --quiet --no-run
	@start=$$(date +%s); $(MAKE) --no-print-directory check; status=$$?; \
	echo "make test: the tests took $$(( $$(date +%s) - start )) s, setup excluded"; exit $$status

# Three lanes, then one test at a time. The tests marked `timed` (and the engine's, but
# for its property tests, named `fuzz_*`, which only compute) time stacks that wait more
# than they compute: they run one at a time beside the static checks
# and the parallel tests, which take only the CPU they leave (SCHED_IDLE: a waking timed
# test preempts them at once; at nice 19, so that the verdicts of the timed runs see them
# as neighbours at low priority). At nice 10 instead, the parallel tests slowed a timed
# one past its bound (a Ray run's p99 at one user). The `serial` ones load the host's cores
# or compare CPU, and run alone after all three.
IDLE := nice -n 19 chrt --idle 0
CRATES := -p pinchpoint-engine -p pinchpoint-logs

check:
	$(MAKE) --no-print-directory -j3 --output-sync=target static parallel-tests timed-tests
	$(PY) -m pytest -m serial --durations=25 -p no:cacheprovider

static:
	$(IDLE) $(VENV)/bin/ruff check python tests
	NO_MKDOCS_2_WARNING=1 $(IDLE) $(VENV)/bin/mkdocs build --strict --quiet --site-dir site
	$(IDLE) $(VENV)/bin/mypy

parallel-tests:
	$(IDLE) env -u MAKEFLAGS -u MFLAGS cargo test $(CRATES) --quiet -- fuzz_
	$(IDLE) $(PY) -m pytest -n 4 --dist loadfile -m "not serial and not timed" --durations=25 -p no:cacheprovider

timed-tests:
	env -u MAKEFLAGS -u MFLAGS cargo test $(CRATES) --quiet -- --skip fuzz_
	$(PY) -m pytest -m timed --durations=25 -p no:cacheprovider

setup: system-deps build

system-deps:
	@bash scripts/install-system-deps.sh demo

system-deps-test:
	@bash scripts/install-system-deps.sh test

$(UV):
	python3 -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet uv

build: $(UV)
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust with https://rustup.rs (rustup default stable)"; exit 1; }
	$(UV) sync --quiet --inexact --group dev --no-install-project --python python3 --compile-bytecode
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release --uv --quiet

lint: build
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests

clean:
	rm -rf target $(VENV) $(TOOLS) runs
