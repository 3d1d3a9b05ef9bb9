# Hypertrain: the two commands of the README plus the quality gate.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)

.PHONY: install devnet test lint check bench fmt schemas docs

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

devnet: install
	$(VENV)/bin/hypertrain devnet $(ARGS)

test: install
	$(PY) -m pytest -q -n 2 $(ARGS)

# The quality gate: lint (format, lint rules, mypy strict), then every test.
lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

check: lint test

fmt: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Generated contract docs: docs/schemas and the route index of docs/challenge-routes.md
# (tests/ops/test_docs.py fails when they drift from the code).
docs: install
	$(PY) -m hypertrain.ops.docs

schemas: docs

bench: install
	$(PY) benchmarks/run_all.py $(ARGS)

# Container images (podman) and the platform-contract canary against the server image;
# see docs/operator.md, "Deploy". IMAGES=server builds the server image only.
IMAGES ?= all
TORCH_VARIANT ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo cuda || echo cpu)
.PHONY: images canary

images:
	TORCH_VARIANT=$(TORCH_VARIANT) scripts/build-images.sh $(IMAGES)

canary:
	scripts/canary.sh $(CANARY_IMAGE)
