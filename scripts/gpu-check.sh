#!/usr/bin/env bash
# Determinism and speed on a GPU machine in under ten minutes; results as JSON.
#   scripts/gpu-check.sh [OUT.json] [--steps N] [--dry-run]
# Two-run and two-process bitwise replay of the 50m preset (float32 and bf16), a
# two-rank NCCL island against the emulation when two devices exist, the
# deterministic/non-deterministic throughput ratio, tokens/s and MFU.
# --dry-run checks the script itself on a CPU (tiny preset, gloo).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
export CUBLAS_WORKSPACE_CONFIG="${CUBLAS_WORKSPACE_CONFIG:-:4096:8}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUT="${1:-gpu-check.json}"
shift || true
exec timeout 600 "$PY" scripts/gpu_check.py --out "$OUT" "$@"
