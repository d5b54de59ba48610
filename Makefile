# One entry point for humans and CI. A fresh machine needs only python3 (3.11+):
# uv is bootstrapped into .tools/ and installs everything else into .venv/.

PYTHON ?= python3
# Use a uv already on PATH when there is one; otherwise bootstrap our own.
UV ?= $(or $(shell command -v uv 2>/dev/null),.tools/bin/uv)
VENV := .venv
# Never download an interpreter: the project runs on the machine's own Python.
export UV_PYTHON_DOWNLOADS := never

.PHONY: install run test lint bench docs clean

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv

install: $(UV)
	@if [ -f uv.lock ]; then $(UV) sync --frozen; else $(UV) sync; fi

run: install
	$(VENV)/bin/muster run

test: install
	$(VENV)/bin/pytest -q

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict libs/

bench: install
	$(VENV)/bin/python -m bench.fanout

docs: install
	$(VENV)/bin/python -m muster_launcher.asyncapi

# Not .muster/: it holds the local database and tokens, which persist on purpose.
clean:
	rm -rf .tools .pytest_cache .mypy_cache .ruff_cache
