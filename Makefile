# One entry point for humans and CI. A fresh machine needs only python3 (3.11+):
# uv is bootstrapped into .tools/ and installs everything else into .venv/.

PYTHON ?= python3
# Use a uv already on PATH when there is one; otherwise bootstrap our own.
UV ?= $(or $(shell command -v uv 2>/dev/null),.tools/bin/uv)
VENV := .venv
# Never download an interpreter: the project runs on the machine's own Python.
export UV_PYTHON_DOWNLOADS := never

.PHONY: install run test lint bench bench-waiting bench-overload bench-table bench-console bench-floors docs clean rebuild rebuild-check chaos soak fuzz engine images compose-test

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv

install: $(UV)
	@if [ -f uv.lock ]; then $(UV) sync --frozen; else $(UV) sync; fi

run: install
	$(VENV)/bin/muster run

# Two workers for everything that does not measure time against itself (each worker has its
# own clusters and database server), then the `serial` tests alone on the machine.
test: install
	$(VENV)/bin/pytest -q --durations=25 -n 2 --dist loadfile -m "not serial"
	$(VENV)/bin/pytest -q --durations=10 -m serial

# Hostile input at scale: schemathesis over /openapi.json and hypothesis over WebSocket
# frames, each >= 10,000 tries against a running system; prints the counts and violations.
fuzz: install
	MUSTER_FUZZ=full $(VENV)/bin/pytest -q -s -m fuzz --timeout=3600 tests/e2e

# A Docker engine (installed and started when none answers; deploy/engine.sh).
engine:
	bash deploy/engine.sh

# The local stand-ins for python:3.11-slim, postgres:16 and apache/kafka (no registry needed).
images: engine
	bash deploy/images/build.sh

# The compose stack on the stand-ins: a delegating turn through the published gateway port,
# the worker container restarted mid-turn, everything torn down (volumes included).
compose-test: install images
	$(VENV)/bin/python deploy/compose_test.py

# Typed throughout: every package of the project, strict (CI runs this before the tests).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict libs services chaos bench

bench: install
	$(VENV)/bin/python -m bench.fanout
	$(VENV)/bin/python -m bench.commands
	$(VENV)/bin/python -m bench.streaming --rounds 0  # the first piece at C=1, the cost at C=16

# The history table of bench/results/*.json (one file per measured run) into bench/results/README.md.
bench-table: install
	$(VENV)/bin/python -m bench.results.table --write

# Where a turn goes: the C=1 turn hop by hop (bench.timeline), the statements a C=16 turn
# runs in PostgreSQL with their time (bench.statements), and what one PostgreSQL round trip
# and one Kafka record cost in CPU (bench.round_trips); each on a fresh cluster.
bench-floors: install
	$(VENV)/bin/python -m bench.timeline
	$(VENV)/bin/python -m bench.statements
	$(VENV)/bin/python -m bench.round_trips

# Idle CPU and throughput with 1,000 sessions waiting for an approval, against none.
bench-waiting: install
	$(VENV)/bin/python -m bench.waiting

# Offered load 3x saturation for BURST_S, then 0.5x: admitted and refused turns, admitted
# latency against saturation's, drain time, idle CPU after it, exactly-once (docs/soak.md).
BURST_S ?= 120
bench-overload: install
	BURST_S=$(BURST_S) $(VENV)/bin/python -m bench.overload

# Random SIGKILLs against a private cluster, then the DESIGN §6 invariants; reports go to
# chaos-results/. Re-run a failure with the seed it printed: make chaos CHAOS_SEED=N
CHAOS_SEED ?= $(shell date +%s)
CHAOS_SESSIONS ?= 30
CHAOS_KILLS ?= 20
chaos: install
	$(VENV)/bin/python -m chaos.run --sessions $(CHAOS_SESSIONS) --kills $(CHAOS_KILLS) --seed $(CHAOS_SEED)

# The chaos workload at a steady rate for SOAK_MINUTES, a random service or the broker
# SIGKILLed every SOAK_KILL_EVERY_S, resources sampled throughout; the chaos invariants and
# the resource checks after it, a JSON report and PNG charts in SOAK_OUT (docs/soak.md).
SOAK_MINUTES ?= 30
SOAK_KILL_EVERY_S ?= 60
SOAK_OUT ?= bench/results/soak-$(shell date +%Y%m%d-%H%M%S)
soak: install
	SOAK_MINUTES=$(SOAK_MINUTES) SOAK_KILL_EVERY_S=$(SOAK_KILL_EVERY_S) SOAK_OUT=$(SOAK_OUT) \
		$(VENV)/bin/python -m chaos.soak

docs: install
	$(VENV)/bin/python -m muster_launcher.asyncapi

# The web console in Debian's Chromium: first render of a 500-message session, a live
# event's latency on the page, the compressed weight of its scripts and styles.
bench-console: install
	$(VENV)/bin/python -m bench.console

# Projections of $$DATABASE_URL, else of the running local database (`make run`).
rebuild: install
	$(VENV)/bin/muster rebuild

rebuild-check: install
	$(VENV)/bin/muster rebuild --check

# Not .muster/: it holds the local database and tokens, which persist on purpose.
clean:
	rm -rf .tools .pytest_cache .mypy_cache .ruff_cache
