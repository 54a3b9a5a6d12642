# memfs — developer entry points. `make demo` and `make test` each work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian packages: FUSE (runtime + headers to build pyfuse3), and the editors/tools the mount
# tests drive for real; postgresql for the throwaway clusters of the PostgreSQL backend tests;
# chromium for the console's browser tests (Playwright drives it; it never downloads a browser).
APT_PACKAGES := fuse3 libfuse3-dev pkg-config vim nano emacs-nox tmux zsh rsync git perl attr \
	libglib2.0-bin postgresql chromium

.PHONY: setup demo test test-fast lint format bench bench-search soak mutate clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq || true; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[mount,server,postgres,semantic,databricks,mcp,test]'
	touch $@

demo: setup
	$(BIN)/python -m scripts.demo

test: setup
	$(BIN)/pytest -q

# The quick inner loop: everything but the real-mount tests.
test-fast: setup
	$(BIN)/pytest -q -m 'not fuse'

lint: setup
	$(BIN)/ruff check memfs kit bench tests scripts
	$(BIN)/ruff format --check memfs kit bench tests scripts
	$(BIN)/mypy memfs bench kit scripts
	@# no sys.path edits: the kit, the benchmarks and the scripts import each other as packages
	@! grep -rn 'sys\.path' bench kit scripts --include='*.py'
	$(BIN)/lint-imports

format: setup
	$(BIN)/ruff format memfs kit bench tests scripts
	$(BIN)/ruff check --fix memfs kit bench tests scripts

# The randomized mount model test, long: 200 examples of 40 steps (12-16 minutes here).
soak: setup
	MEMFS_MODEL_EXAMPLES=200 MEMFS_MODEL_STEPS=40 $(BIN)/pytest -q tests/model -o timeout=3600

# Mutation testing ([tool.mutmut] in pyproject.toml: which modules, which tests), not in `test`:
# slow (tens of minutes on 2 cores). Survivors: `$(BIN)/mutmut results`, `$(BIN)/mutmut show NAME`.
mutate: setup
	$(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

# Every benchmark case of the harness (`python -m bench --list`), one after the other
# (docs/benchmarks.md says what each measures); `search` among them (also alone: `make bench-search`).
bench: setup
	@set -e; for name in $$($(BIN)/python -m bench --list | cut -d' ' -f1); do \
	  echo "== python -m bench $$name"; $(BIN)/python -m bench $$name; echo; \
	done

# Search quality (MRR@10, recall@10 on the labelled set) and latency, BM25 and hybrid. Long:
# the hybrid fill embeds every one of its 20,000 entries (docs/benchmarks.md, "Search").
bench-search: setup
	$(BIN)/python -m bench search

clean:
	rm -rf $(VENV) mutants .pytest_cache .mypy_cache .ruff_cache build *.egg-info
