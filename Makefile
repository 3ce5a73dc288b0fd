# The two front-door commands are `make demo` and `make test`; both set up on first use.
SHELL := /bin/bash
# One cache setting for make and tileport alike (toolchain.env.cache_dir reads it too).
export TILEPORT_CACHE ?= $(HOME)/.cache/tileport
VENV := .venv
PY := $(VENV)/bin/python
TILEPORT := $(VENV)/bin/tileport
export PIP_CACHE_DIR ?= $(TILEPORT_CACHE)/pip
# One cargo target per kind of checkout (dev, ci): see toolchain.env.checkout_kind.
export TILEPORT_CHECKOUT_KIND ?= dev
export CARGO_TARGET_DIR ?= $(TILEPORT_CACHE)/target-$(TILEPORT_CHECKOUT_KIND)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
RUST_ENV = eval "$$($(TILEPORT) env --shell)"

# `make check` is the fast loop (under 5 min on 2 cores): lint, types and the tests not
# marked slow (no Rust build, no kernel batch, no whole pipeline, browser or worker).
.PHONY: setup demo test check lint typecheck rust-build rust-lint pytest sandbox-tools

setup: $(VENV)/.installed rust-build

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

rust-build: $(VENV)/.installed
	$(RUST_ENV) && cargo build --release --locked --manifest-path kernels_rs/Cargo.toml

# The sandbox first: without it a conversion cannot start, so the demo stops before
# building anything and says how to fix it.
demo: sandbox-tools setup
	$(PY) -m app.demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

rust-lint: rust-build
	$(RUST_ENV) && cargo fmt --manifest-path kernels_rs/Cargo.toml --all -- --check
	$(RUST_ENV) && cargo clippy --release --locked --manifest-path kernels_rs/Cargo.toml --all-targets -- -D warnings

# Untrusted steps run in bubblewrap (toolchain/sandbox.py, docs/SERVICE.md); as root
# on Debian it is installed where missing.
sandbox-tools:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& echo "installing bubblewrap (the sandbox of untrusted steps)" \
		&& apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null \
		&& command -v bwrap >/dev/null; } \
		|| { echo "bwrap is missing: install bubblewrap (apt-get install -y bubblewrap), then run make again" >&2; exit 1; }

# The fast tests on every core first (they share no service state), then the slow ones,
# a whole file per worker (a file's tests share its ported kernels and its brokers'
# queues): most of a slow test waits on one tileiras or one Python process at a time,
# so two workers finish in about two thirds of the time one takes.
pytest: setup sandbox-tools
	$(VENV)/bin/pytest -q -ra -m "not slow" -n auto --durations=15
	$(VENV)/bin/pytest -q -ra -m slow -n auto --dist loadfile --durations=30

test: lint typecheck rust-lint pytest

# The fast loop: the tests not marked slow, on every core (pytest-xdist).
check: lint typecheck sandbox-tools
	$(VENV)/bin/pytest -q -ra -m "not slow" -n auto --durations=15
