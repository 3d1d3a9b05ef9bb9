from __future__ import annotations

import pytest
import torch

from hypertrain.trainer.blob import blob_hash, decode_model_blob, encode_model_blob
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import PRESETS


def test_blob_round_trip_is_deterministic() -> None:
    spec = PRESETS["tiny"]
    params = init_params(spec, 0)
    data = encode_model_blob(params, spec)
    assert data == encode_model_blob(init_params(spec, 0), spec)
    back = decode_model_blob(data, spec, expected_sha256=blob_hash(data))
    assert list(back) == list(params)
    assert all(torch.equal(back[k], params[k]) for k in params)


def test_bad_blobs_are_refused() -> None:
    spec = PRESETS["tiny"]
    params = init_params(spec, 0)
    data = encode_model_blob(params, spec)
    with pytest.raises(CheckpointError, match="expected"):
        decode_model_blob(data, spec, expected_sha256="0" * 64)
    with pytest.raises(CheckpointError, match="another model"):
        decode_model_blob(data, PRESETS["tiny-moe"])
    for bad in (data[:100], data[:-3], b"", b"\xff" * 16):
        with pytest.raises(CheckpointError):
            decode_model_blob(bad, spec)
    params["norm.weight"] = params["norm.weight"].clone()
    params["norm.weight"][0] = float("nan")
    with pytest.raises(CheckpointError, match="NaN"):
        decode_model_blob(encode_model_blob(params, spec), spec)
    with pytest.raises(CheckpointError, match="missing"):
        encode_model_blob({}, spec)


def test_blob_bytes_are_stable_across_processes() -> None:
    import subprocess
    import sys

    code = (
        "import hashlib; from hypertrain.trainer.presets import get_preset; "
        "from hypertrain.trainer.model import init_params; "
        "from hypertrain.trainer.blob import encode_model_blob; "
        "s = get_preset('tiny'); "
        "print(hashlib.sha256(encode_model_blob(init_params(s, 3), s)).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(3)
    }
    assert len(digests) == 1
