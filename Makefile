# Hypertrain: the two commands of the README plus the quality gate.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements.lock
TORCH_LOCK := requirements-torch.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) $(TORCH_LOCK) | sha256sum | cut -c1-16)

.PHONY: install devnet test test-all lint check bench fmt schemas docs lock

install: $(STAMP)

# Every dependency at the version and SHA-256 of the lock (pip --require-hashes), then the
# package itself, editable, without resolving anything again. torch's CPU build is on the
# PyTorch index, not on PyPI; `make install TORCH_INDEX=` skips that index where a local
# wheel house (pip's find-links) already holds the wheel. torch is installed first, alone,
# from $(TORCH_LOCK) (its lines of the lock), so only that one package consults the PyTorch
# index; the rest of the lock then finds it already satisfied.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(STAMP): pyproject.toml $(LOCK) $(TORCH_LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
	  echo "make install: the locks hold Python 3.11's wheels only, and $(VENV) has Python" \
	    "$$($(PY) -c 'import platform; print(platform.python_version())')." \
	    "Install python3.11 (then rm -rf $(VENV)), or see docs/miner.md for 3.12 to 3.14 (unlocked)."; \
	  exit 1; }
	@echo "[1/4] upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "[2/4] installing torch (CPU build, a download of about 200 MB; pip shows its progress)"
	$(PY) -m pip install --progress-bar on --require-hashes --no-deps $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r $(TORCH_LOCK)
	@echo "[3/4] installing the other $$(grep -c '^[a-z]' $(LOCK)) locked packages (each checked against its SHA-256)"
	$(PY) -m pip install --progress-bar on --require-hashes -r $(LOCK)
	@echo "[4/4] installing hypertrain itself (editable)"
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@echo "installed: . $(VENV)/bin/activate puts hypertrain and hypertrain-miner on your PATH"
	@rm -f $(VENV)/.installed-*
	@touch $@

# Regenerate the lock after changing a pin in pyproject.toml (uv, from PyPI): every
# dependency of '.[dev]' for Python 3.11 on Linux x86-64, with the hashes of all its files.
UV_VERSION := 0.13.9
lock:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --generate-hashes \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --override lock-overrides.txt --no-emit-find-links -o $(LOCK)
	awk '/^torch==/{p=1} p&&/^[a-z]/&&!/^torch==/{p=0} p' $(LOCK) | grep -v '^ *#' > $(TORCH_LOCK)

devnet: install
	$(VENV)/bin/hypertrain devnet $(ARGS)

# The tests but those marked slow (whole networks on loopback, crash runs): minutes.
test: install
	$(PY) -m pytest -q -n 2 -m "not slow" $(ARGS)

# Every test, the slow ones included: what CI runs (`make check`).
test-all: install
	$(PY) -m pytest -q -n 2 $(ARGS)

# The quality gate: lint (format, lint rules, mypy strict), then every test (slow included).
lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

check: lint test-all

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
