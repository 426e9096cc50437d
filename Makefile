# Triton Academy: two commands on a fresh machine with Python >= 3.10.
#
#   make serve   create .venv if missing, install, build and serve the site on http://127.0.0.1:8000
#   make test    create .venv if missing, install, lint, install Debian's chromium if missing, run pytest
#
# Installs are skipped on re-runs until pyproject.toml changes (stamp file in .venv).

PYTHON     ?= python3
VENV       ?= .venv
# CPU torch is installed FIRST: a plain `pip install torch` on Linux pulls GBs of CUDA
# libraries. On machines whose pip does not already find a CPU wheel, add
#   TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC     ?= torch==2.13.0
TORCH_PIP_ARGS ?=
HOST       ?= 127.0.0.1
PORT       ?= 8000
CHROMIUM   ?= /usr/bin/chromium
# Seconds a notebook cell may run when mkdocs-jupyter executes docs/tutorials/*.py.
NB_CELL_TIMEOUT ?= 120

PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.academy-installed
NB_CONFIG  := $(VENV)/etc/jupyter/jupyter_nbconvert_config.json
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install serve site lint test test-fast browser clean

install: $(STAMP) $(NB_CONFIG)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install "$(TORCH_SPEC)" $(TORCH_PIP_ARGS)
	$(PY) -m pip install -e ".[test,docs]"
	touch $@

# mkdocs-jupyter has no timeout option; nbconvert reads this file from the venv's
# Jupyter config path (sys.prefix/etc/jupyter) when it executes the tutorials.
$(NB_CONFIG): Makefile | $(PY)
	mkdir -p $(dir $@)
	printf '{\n  "NotebookClient": {"timeout": %s}\n}\n' "$(NB_CELL_TIMEOUT)" > $@

serve: install
	$(VENV)/bin/mkdocs serve --strict --dev-addr $(HOST):$(PORT)

site: install
	$(VENV)/bin/mkdocs build --strict

browser:
	@if [ ! -x "$(CHROMIUM)" ]; then \
		echo "installing Debian's chromium for the site test"; \
		$(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
	fi

# The linter and the formatter first: seconds, before minutes of tests.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: install lint browser
	$(PY) -m pytest

# Everything except the site build and the browser.
test-fast: install
	$(PY) -m pytest -m "not slow"

clean:
	rm -rf site test-artifacts .pytest_cache .cache
