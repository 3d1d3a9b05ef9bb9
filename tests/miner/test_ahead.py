"""Work trained ahead (overlapped rounds) is adopted only for exactly the round that
opened: a changed roster, key, layout or start throws it away, and a restarted miner
resumes ahead work of the same prediction."""

from __future__ import annotations

from pathlib import Path

from hypertrain.miner.ahead_files import Prediction, adopt_ahead, ahead_dir, begin_ahead
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.report import Reporter

PRED = Prediction("aa" * 32, '{"dp_ranks":1}', "bb" * 32)


class _Events(Reporter):
    def __init__(self) -> None:
        super().__init__("miner")
        self.seen: list[tuple[str, dict[str, object]]] = []

    def event(self, name: str, **fields: object) -> None:
        self.seen.append((name, fields))


def _config(tmp_path: Path) -> MinerConfig:
    return MinerConfig(run_id="run-1", state_dir=str(tmp_path / "state"))


def _work(cfg: MinerConfig, prediction: Prediction) -> Path:
    workdir = begin_ahead(cfg, 1, prediction)
    for k in range(3):
        (workdir / f"ckpt_{k}.bin").write_bytes(bytes([k]) * 8)
    (workdir / "losses.json").write_text("{}")
    return workdir


def test_ahead_work_of_the_opened_round_is_adopted(tmp_path: Path) -> None:
    cfg, events = _config(tmp_path), _Events()
    _work(cfg, PRED)
    (cfg.round_dir(1) / "ckpt_5.bin").write_bytes(b"another start")  # earlier, other work
    (cfg.round_dir(1) / "start_model.safetensors").write_bytes(b"kept")
    assert adopt_ahead(cfg, 1, PRED, events)
    names = sorted(p.name for p in cfg.round_dir(1).iterdir())
    assert names == ["ckpt_0.bin", "ckpt_1.bin", "ckpt_2.bin", "losses.json",
                     "start_model.safetensors"]  # fmt: skip
    assert (cfg.round_dir(1) / "ckpt_2.bin").read_bytes() == bytes([2]) * 8
    assert not ahead_dir(cfg, 1).exists() and events.seen == []
    assert not adopt_ahead(cfg, 1, PRED, events)  # nothing left to adopt


def test_ahead_work_of_another_prediction_is_thrown_away(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    for field, value in (("ids_sha256", "cc" * 32), ("layout", "{}"), ("start", "dd" * 32)):
        events = _Events()
        _work(cfg, PRED)
        actual = Prediction(**{**_fields(PRED), field: value})
        assert not adopt_ahead(cfg, 1, actual, events)
        assert not ahead_dir(cfg, 1).exists()
        assert not list(cfg.round_dir(1).glob("ckpt_*.bin"))
        assert events.seen[0][0] == "ahead_discarded"
        assert field.split("_")[0] in str(events.seen[0][1]["reason"])


def test_a_restarted_miner_resumes_ahead_work_of_the_same_prediction(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    workdir = _work(cfg, PRED)
    assert begin_ahead(cfg, 1, PRED) == workdir and (workdir / "ckpt_2.bin").exists()
    other = Prediction("ee" * 32, PRED.layout, PRED.start)
    assert not (begin_ahead(cfg, 1, other) / "ckpt_2.bin").exists()  # other work: gone


def _fields(p: Prediction) -> dict[str, str]:
    return {"ids_sha256": p.ids_sha256, "layout": p.layout, "start": p.start}
