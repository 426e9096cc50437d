# Triton Academy: two commands on a fresh machine with Python >= 3.10.
#
#   make serve   create .venv if missing, install, build and serve the site on http://127.0.0.1:8000
#   make test    create .venv if missing, install, lint, install Debian's chromium if missing, run pytest
#   make lock    refresh requirements/ci.lock (what `make install` installs) in a throw-away venv
#   make deploy  build and push the site to the gh-pages branch (the Pages workflow is the usual way)
#
# Installs are skipped on re-runs until pyproject.toml or the lock changes (stamp file in .venv).

PYTHON     ?= python3
VENV       ?= .venv
# The CPU CI set, pinned: torch, triton and everything `.[test,docs]` resolves to
# (Python 3.11, Linux x86_64). `make lock` refreshes it; LOCK= installs unpinned instead.
LOCK       ?= requirements/ci.lock
# CPU torch is installed FIRST, at the lock's pin: a plain `pip install torch` on Linux
# pulls GBs of CUDA libraries. pip's dry run says what it would install; if that is a
# CUDA build (it brings nvidia-* packages), torch comes from TORCH_CPU_INDEX instead.
TORCH_SPEC      ?= $(or $(shell sed -n 's/^\(torch==[^ ;]*\).*/\1/p' $(LOCK) 2>/dev/null),torch)
TORCH_PIP_ARGS  ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
HOST       ?= 127.0.0.1
PORT       ?= 8000
# The browser of the site tests, found as academy/site/pytest_site.py finds it:
# $ACADEMY_CHROMIUM, else the first of these on PATH (else Playwright's own, if installed).
CHROMIUM   ?= $(or $(ACADEMY_CHROMIUM),$(firstword $(foreach b,chromium chromium-browser google-chrome google-chrome-stable,$(shell command -v $(b) 2>/dev/null))))
# pytest-xdist workers of `make test`: 2 suits the 2-core CI machine; more cores, more workers.
TEST_WORKERS ?= 2
# Seconds a notebook cell may run when mkdocs-jupyter executes docs/tutorials/*.py.
NB_CELL_TIMEOUT ?= 120

PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.academy-installed
NB_CONFIG  := $(VENV)/etc/jupyter/jupyter_nbconvert_config.json
LOCK_VENV  := $(VENV)-lock
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install serve site deploy lint test test-fast browser lock clean

install: $(STAMP) $(NB_CONFIG)

$(PY):
	$(PYTHON) -m venv $(VENV)

# $(call install_torch,PYTHON): TORCH_SPEC into PYTHON's environment, a CPU build. The dry
# run reads metadata only; PYTHON.torch-report.json is its report, removed afterwards.
define install_torch
	$(1) -m pip install --dry-run --quiet --report $(1).torch-report.json "$(TORCH_SPEC)" $(TORCH_PIP_ARGS)
	if $(1) -c 'import json, sys; r = json.load(open(sys.argv[1])); \
	            sys.exit(any(i["metadata"]["name"].startswith("nvidia-") for i in r["install"]))' \
	        $(1).torch-report.json; then \
		$(1) -m pip install "$(TORCH_SPEC)" $(TORCH_PIP_ARGS); \
	else \
		echo "pip would install a CUDA build of $(TORCH_SPEC): taking the CPU build from $(TORCH_CPU_INDEX)"; \
		$(1) -m pip install "$(TORCH_SPEC)" --index-url $(TORCH_CPU_INDEX); \
	fi
	rm -f $(1).torch-report.json
endef

$(STAMP): pyproject.toml $(LOCK) | $(PY)
	$(call install_torch,$(PY))
ifneq ($(LOCK),)
	$(PY) -m pip install -r $(LOCK)
	$(PY) -m pip install --no-deps -e .
	$(PY) -m pip check  # a dependency added to pyproject.toml but missing from the lock fails here
else
	$(PY) -m pip install -e ".[test,docs]"
endif
	touch $@

# The lock, refreshed: a throw-away venv gets CPU torch at TORCH_SPEC (the lock's pin;
# `make lock TORCH_SPEC=torch==X` moves it), then `.[test,docs]` unpinned, frozen.
# torch is written without its local label (+cpu), so that the pin matches the CPU build
# from any index.
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(call install_torch,$(LOCK_VENV)/bin/python)
	$(LOCK_VENV)/bin/python -m pip install -e ".[test,docs]"
	mkdir -p $(dir $(LOCK))
	{ echo "# The CPU CI set: torch, triton and everything \`pip install -e \".[test,docs]\"\` resolves to."; \
	  echo "# Written by \`make lock\` ($$($(LOCK_VENV)/bin/python -c "import platform as p; print('Python', p.python_version(), p.system(), p.machine())")); do not edit by hand."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable | sed 's/^\(torch==[^+]*\)+cpu$$/\1/'; \
	} > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

# mkdocs-jupyter has no timeout option; nbconvert reads this file from the venv's
# Jupyter config path (sys.prefix/etc/jupyter) when it executes the tutorials.
$(NB_CONFIG): Makefile | $(PY)
	mkdir -p $(dir $@)
	printf '{\n  "NotebookClient": {"timeout": %s}\n}\n' "$(NB_CELL_TIMEOUT)" > $@

serve: install
	$(VENV)/bin/mkdocs serve --strict --dev-addr $(HOST):$(PORT)

site: install
	$(VENV)/bin/mkdocs build --strict

# Publishing by hand: build and push to the gh-pages branch of `origin` (GitHub Pages
# set to "Deploy from a branch"). .github/workflows/pages.yml publishes from CI instead.
deploy: install
	$(VENV)/bin/mkdocs gh-deploy --strict --force

# A browser for the site tests: CHROMIUM if set or found, else Playwright's own if it
# has one, else Debian's chromium (apt). ACADEMY_SKIP_BROWSER=1 installs nothing.
browser: install
ifeq ($(ACADEMY_SKIP_BROWSER),1)
	@echo "ACADEMY_SKIP_BROWSER=1: the browser tests are skipped, no browser installed"
else
	@if [ -n "$(CHROMIUM)" ]; then \
		[ -x "$(CHROMIUM)" ] || { echo "CHROMIUM=$(CHROMIUM) is not an executable"; exit 1; }; \
	elif $(PY) -c 'import os, sys; from playwright.sync_api import sync_playwright; \
	               p = sync_playwright().start(); path = p.chromium.executable_path; p.stop(); \
	               sys.exit(not os.path.isfile(path))' 2>/dev/null; then \
		echo "using Playwright's own Chromium"; \
	elif command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium for the site test"; \
		$(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
	else \
		echo "no Chromium found: install one and set ACADEMY_CHROMIUM=/path/to/it, or ACADEMY_SKIP_BROWSER=1"; exit 1; \
	fi
endif

# The linter and the formatter first: seconds, before minutes of tests.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two workers (pytest-xdist). Each worker that gets a site test starts a browser for itself
# (pytest 9.2 ignores xdist's group marks), but the site is built once, by the first to need it,
# while the other waits, and each page is visited once: the workers that need the visits split
# the pages between them and share the results (academy/site/pytest_site.py).
test: install lint browser
	ACADEMY_CHROMIUM="$(CHROMIUM)" $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

# Everything except the site build and the browser.
test-fast: install
	$(PY) -m pytest -m "not slow"

clean:
	rm -rf site test-artifacts .pytest_cache .cache $(LOCK_VENV)
