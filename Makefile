# Trainboard: `make run` sets up everything and starts it; `make test` runs every test.
VENV ?= .venv
PY := $(VENV)/bin/python
# the venv's interpreter must be one the unprivileged job user can run: Debian's
# /usr/bin/python3 is world-readable, a pyenv under root's 0700 home is not
BASE_PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
STAMP := $(VENV)/.installed

.PHONY: run test test-fast install frontend lint typecheck api-types clean gpu-acceptance \
	gpu-acceptance-dry-run gpu-wheels

run: install frontend
	$(VENV)/bin/trainboard up

# a base directory of its own: another pytest on the machine rotates only its default
# ones, so it cannot delete this run's live stacks (their SQLite files) mid-test
test: install frontend lint typecheck
	base=$$(mktemp -d /tmp/trainboard-pytest.XXXXXX) && $(PY) -m pytest --basetemp=$$base; \
	status=$$?; rm -rf $$base; exit $$status
	cd frontend && npm test

# the tests that start no rank process, service or browser (not marked slow or browser),
# in two pytest-xdist worker processes (each with Redis databases of its own, see
# tests/conftest.py; worksteal: an idle worker takes tests from the busy one at the end),
# and beside them the frontend's unit tests (their output is printed after pytest's; pytest
# leaves part of the two cores idle, waiting on PostgreSQL and Redis)
# bytecode and pytest's rewritten test modules are cached (__pycache__, ignored by git) even
# where the environment says not to (set but empty it is off): each of the three processes
# compiles them otherwise
test-fast: export PYTHONDONTWRITEBYTECODE =
test-fast: install frontend/node_modules/.package-lock.json
	base=$$(mktemp -d /tmp/trainboard-pytest.XXXXXX); vitest=$$(mktemp); \
	(cd frontend && npm test > $$vitest 2>&1) & frontend=$$!; \
	$(PY) -m pytest -q -n 2 --dist worksteal -m "not slow and not browser" -p no:cacheprovider \
		--basetemp=$$base; \
	status=$$?; rm -rf $$base; wait $$frontend; frontend_status=$$?; cat $$vitest; rm -f $$vitest; \
	[ $$status = 0 ] && [ $$frontend_status = 0 ]

install: $(STAMP)

# torch is pinned first so pip takes the local CPU build instead of a multi-GB CUDA download
$(STAMP): pyproject.toml
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

frontend: frontend/node_modules/.package-lock.json
	cd frontend && npm run build

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund

# regenerate the frontend's API types from the backend's OpenAPI schema
api-types: install frontend/node_modules/.package-lock.json
	$(PY) -m backend.app > frontend/openapi.json
	cd frontend && npm run gen:api

PY_DIRS := $(wildcard backend workers tests benchmarks migrations)

lint: install
	$(VENV)/bin/ruff check $(PY_DIRS)
	$(VENV)/bin/ruff format --check $(PY_DIRS)

typecheck: install
	$(VENV)/bin/mypy

# GPU acceptance (docs/benchmarks.md "GPU acceptance"). On a GPU machine, from a bare
# checkout: the script makes its own venv (CUDA torch) under ACCEPTANCE_OUT, so it needs no
# `make install`. The dry run (CPU slots) runs in the project's venv, as CI does.
ACCEPTANCE_OUT ?= /tmp/trainboard-gpu-acceptance
gpu-acceptance:
	$(BASE_PYTHON) benchmarks/gpu_acceptance.py --out $(ACCEPTANCE_OUT)

# a wheel folder for a GPU machine that reaches no package index but holds a CUDA torch:
# there, `python3 benchmarks/gpu_acceptance.py --out DIR --torch-python "$$(command -v
# python3)" --wheels .whl` (docs/benchmarks.md "Offline install")
GPU_WHEELS ?= .whl
GPU_PYTHON ?= 3.12
gpu-wheels: install
	$(PY) benchmarks/gpu_acceptance.py --download-wheels $(GPU_WHEELS) --for-python $(GPU_PYTHON)

gpu-acceptance-dry-run: install
	$(PY) benchmarks/gpu_acceptance.py --dry-run --out $(ACCEPTANCE_OUT)-dry-run

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist
