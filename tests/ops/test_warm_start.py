"""The data-parallel warm start as an operator runs it: run init writes it, ``run
warm-start`` trains round 0's model, and anyone replays it to check the published one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.data import Dataset, warm_start_ids
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import manifest_document
from hypertrain.protocol.recipe import WARM_START_PERCENT, warm_start_steps
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.model import init_params
from tests.ops.conftest import LiveService


def _init(tmp_path: Path, dataset: Path, *extra: str) -> tuple[Path, RunManifest]:
    """``run init`` with a 1 % warm start unless ``extra`` sets the share."""
    out = tmp_path / "run.json"
    if "--warm-start-percent" not in extra:
        extra = ("--warm-start-percent", "1", *extra)
    args = ["run", "init", "--run-id", "w1", "--preset", "tiny", "--dataset-dir", str(dataset),
            "--local"]  # fmt: skip
    assert main([*args, "--h", "4", "--j", "2", "--rounds", "9", *extra, "--out", str(out)]) == 0
    return out, RunManifest.model_validate(manifest_document(out.read_bytes()))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what came before (run init's lines)
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _warm(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return _cli(capsys, "run", "warm-start", *argv)


def test_run_init_plans_a_share_of_all_steps_as_the_warm_start(
    small_dataset: Path, tmp_path: Path
) -> None:
    _, manifest = _init(tmp_path, small_dataset)
    warm = manifest.warm_start
    assert warm is not None and warm.steps == warm_start_steps(36, 1) == 1
    assert warm.samples_per_step == 8 * manifest.round.layout.micro_batch_size
    # the schedule covers the warm start and the rounds; round 0 starts after the warm start
    assert manifest.inner.total_steps == 36 + 1 and manifest.first_round_step == 1
    _, none = _init(tmp_path, small_dataset, "--warm-start-percent", "0", "--force")
    assert none.warm_start is None and none.inner.total_steps == 36
    assert "warm_start" not in json.loads(none.canonical())  # older manifests keep their hash
    # the recipe's share, when run init is not told one (none: protocol.recipe)
    out = tmp_path / "recipe.json"
    args = ["run", "init", "--run-id", "w1", "--preset", "tiny", "--dataset-dir",
            str(small_dataset), "--local", "--h", "4", "--j", "2", "--rounds", "9"]  # fmt: skip
    assert main([*args, "--out", str(out)]) == 0
    recipe = RunManifest.model_validate(manifest_document(out.read_bytes()))
    steps = warm_start_steps(36, WARM_START_PERCENT)
    assert (recipe.warm_start.steps if recipe.warm_start else 0) == steps


def test_warm_start_trains_round_zero_and_a_replay_checks_it(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, manifest = _init(tmp_path, small_dataset)
    model = tmp_path / "genesis.model"
    base = ["--manifest", str(path), "--dataset-dir", str(small_dataset)]
    code, out, err = _warm(capsys, *base, "--out", str(model))
    assert code == 0, err
    line = json.loads(out)
    blob = model.read_bytes()
    assert manifest.warm_start is not None
    assert line["model_sha256"] == hashlib.sha256(blob).hexdigest()
    assert line["steps"] == manifest.warm_start.steps
    params = decode_model_blob(blob, manifest.model)
    fresh = init_params(manifest.model, manifest.seed)
    assert any(not params[k].equal(fresh[k]) for k in fresh)  # it trained
    # a replay elsewhere computes the same bytes, and a published model that differs is
    # refused with both hashes named
    code, out, _ = _warm(capsys, *base, "--expect-sha256", line["model_sha256"])
    assert code == 0 and json.loads(out)["matches"] is True
    code, _, err = _warm(capsys, *base, "--expect-sha256", "0" * 64)
    assert code == 1 and "0" * 64 in err and line["model_sha256"] in err
    # a malformed hash is a usage error, not an accusation; a call that would neither
    # write nor check a model is refused rather than passed
    code, _, err = _warm(capsys, *base, "--expect-sha256", line["model_sha256"][:16])
    assert code == 1 and "64 lowercase hex" in err and "not the warm start's" not in err
    code, _, err = _warm(capsys, *base)
    assert code == 1 and "nothing to check" in err


def test_warm_start_errors_are_one_clear_line(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _init(tmp_path, small_dataset, "--warm-start-percent", "0")
    out = ["--out", str(tmp_path / "g.model")]
    base = ["--manifest", str(path), "--dataset-dir", str(small_dataset), *out]
    code, _, err = _warm(capsys, *base)
    assert code == 1 and "has no warm start" in err
    code, _, err = _cli(
        capsys, "run", "init", "--run-id", "w1", "--dataset-dir", str(small_dataset),
        "--warm-start-percent", "1", "--warm-start-batch", "100000", "--local",
        "--out", str(tmp_path / "big.json"),
    )  # fmt: skip
    assert code == 1 and "does not fit" in err and "--warm-start-batch" in err
    bad = tmp_path / "bad.json"
    doc = manifest_document(path.read_bytes())
    bad.write_text(json.dumps({**doc, "warm_start": {"steps": 0, "samples_per_step": 4}}))
    code, _, err = _warm(capsys, "--manifest", str(bad), "--dataset-dir", str(small_dataset), *out)
    assert code == 1 and "warm_start.steps" in err and err.count("\n") == 1
    code, _, err = _warm(capsys, "--manifest", str(path), "--run-id", "w1",
                         "--dataset-dir", str(small_dataset))  # fmt: skip
    assert code == 1 and "--service-url" in err
    (tmp_path / "w").mkdir()
    warm, _ = _init(tmp_path / "w", small_dataset)
    code, _, err = _warm(capsys, "--manifest", str(warm), "--dataset-dir", str(tmp_path), *out)
    assert code == 1 and "dataset" in err


def test_the_warm_start_order_is_public_and_never_held_out(small_dataset: Path) -> None:
    split = Dataset(small_dataset / DESCRIPTOR_NAME).split()
    steps = warm_start_ids("w1", 0, split, 5, 7)
    again = warm_start_ids("w1", 0, split, 5, 7)
    assert [s.tolist() for s in steps] == [s.tolist() for s in again]
    ids = [int(i) for s in steps for i in s]
    assert len(ids) == len(set(ids)) == 35 and len(steps) == 5
    assert not any(split.is_heldout(i) for i in ids)
    other = warm_start_ids("w2", 0, split, 5, 7)  # another run, another order
    assert [s.tolist() for s in other] != [s.tolist() for s in steps]
    # longer than one pass: each step stays whole inside one pass, passes differ in order
    b = split.train_count // 2 + 1  # one step per pass
    two = warm_start_ids("w1", 0, split, 2, b)
    assert all(len(set(s.tolist())) == b for s in two) and two[0].tolist() != two[1].tolist()


def test_the_service_check_reads_round_zeros_signed_record_and_fails_closed(
    live_service: LiveService, small_dataset: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``--service-url`` checks against the start model the coordinator signed for round 0;
    before round 0 exists there is nothing to check, which is an error, not a pass."""
    svc = live_service
    path, _ = _init(tmp_path, small_dataset)
    admin = ["--service-url", svc.url, "--admin-token-file", str(svc.admin_token)]
    assert main(["challenge", "create-run", *admin, "--manifest", str(path)]) == 0
    base = ["--service-url", svc.url, "--run-id", "w1", "--dataset-dir", str(small_dataset)]
    code, _, err = _warm(capsys, *base)
    assert code == 1 and "nothing to check" in err
    model = tmp_path / "genesis.model"
    code, out, err = _warm(capsys, *base, "--out", str(model))
    assert code == 0 and json.loads(out)["matches"] is None, err
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    opened = ["--run-id", "w1", "--start-model-sha256", sha, "--start-model-url", "x:" + sha]
    assert main(["challenge", "open-round", *admin, *opened]) == 0
    code, out, err = _warm(capsys, *base)
    assert code == 0 and json.loads(out)["matches"] is True, err
