# memfs — developer entry points. `make demo` and `make test` each work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian packages, by what needs them (a minimal Debian or Ubuntu image has none of them):
# - to build: `python3 -m venv` needs python3-venv; pyfuse3 has no wheel, so pip compiles it,
#   which takes a C compiler (gcc, libc6-dev's headers), python3-dev and libfuse3-dev found by
#   pkg-config;
# - to mount: fuse3 (fusermount3, the kernel's helper);
# - for the tests: the editors and tools the mount tests drive for real, postgresql for the
#   throwaway clusters of the PostgreSQL backend tests, chromium for the console's browser tests
#   (Playwright drives it; it never downloads a browser).
# README ("Set-up, step by step") shows the same lists; tests/test_setup.py keeps them in step.
APT_BUILD := python3-venv python3-dev gcc libc6-dev pkg-config libfuse3-dev
APT_MOUNT := fuse3
APT_TEST := vim nano emacs-nox tmux zsh rsync git perl attr libglib2.0-bin postgresql chromium
APT_PACKAGES := $(APT_BUILD) $(APT_MOUNT) $(APT_TEST)
# The extras `make setup` installs (test brings every other one too: the suite runs them all).
EXTRAS := mount,server,postgres,semantic,databricks,mcp,test

.PHONY: setup system-packages demo test test-fast lint format bench bench-search soak mutate clean

setup: $(VENV)/.installed

# Checked on every `make setup` (one dpkg-query per package, well under a second) and silent when
# nothing is missing, so a package added to the lists reaches machines set up before it.
# Not root and no sudo: the build and mount packages are needed (stop, naming the command for an
# administrator); the test tools are only warned about (`make demo` runs without them).
system-packages:
	@missing() { for p in "$$@"; do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed" || printf ' %s' "$$p"; \
	done; }; \
	if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then \
	  echo "not a Debian/Ubuntu machine (no dpkg-query or apt-get): install your system's equivalents of"; \
	  echo "  $(APT_PACKAGES)"; \
	  exit 0; \
	fi; \
	build=$$(missing $(APT_BUILD)); mount=$$(missing $(APT_MOUNT)); tests=$$(missing $(APT_TEST)); \
	[ -n "$$build$$mount$$tests" ] || exit 0; \
	echo "Debian packages missing:"; \
	[ -z "$$build" ] || echo "  to build memfs (a venv, pyfuse3 compiled):$$build"; \
	[ -z "$$mount" ] || echo "  to mount:$$mount"; \
	[ -z "$$tests" ] || echo "  for make test (editors, PostgreSQL, Chromium):$$tests"; \
	if [ "$$(id -u)" = 0 ]; then SUDO=""; \
	elif command -v sudo >/dev/null; then SUDO="sudo"; \
	elif [ -n "$$build$$mount" ]; then \
	  echo "not root and no sudo: ask an administrator to run"; \
	  echo "  apt-get install$$build$$mount$$tests"; \
	  echo "then run make setup again (README, \"Without root\")"; \
	  exit 1; \
	else \
	  echo "not root and no sudo: make demo works without them; for make test ask an administrator to run"; \
	  echo "  apt-get install$$tests"; \
	  exit 0; \
	fi; \
	echo "installing them: $$SUDO apt-get install$$build$$mount$$tests"; \
	$$SUDO apt-get update -qq || true; \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$build$$mount$$tests

$(VENV)/.installed: pyproject.toml | system-packages
	@test -x $(BIN)/python || { echo "creating $(VENV) ($(PYTHON) -m venv)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing memfs with its extras [$(EXTRAS)] into $(VENV) (pip; compiles pyfuse3 the first time)"
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
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
# Then retrieval on LoCoMo (docs/benchmarks.md, "LoCoMo retrieval"), whose data stays outside
# the project: shared/locomo-dev beside the checkout, or `make bench-search MEMFS_LOCOMO_DIR=DIR`.
bench-search: setup
	$(BIN)/python -m bench search
	$(BIN)/python -m bench locomo

clean:
	rm -rf $(VENV) mutants .pytest_cache .mypy_cache .ruff_cache build *.egg-info
