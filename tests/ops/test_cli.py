"""Operator commands as a user runs them: run init, keys, create-run, status, data, export."""

from __future__ import annotations

import http.server
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hypertrain.challenge.cli import referee_note
from hypertrain.challenge.database import DB_NAME
from hypertrain.challenge.metagraph import parse_snapshot
from hypertrain.cli import main
from hypertrain.data.errors import DataError
from hypertrain.data.publish import fetch_dataset, make_server, serve_in_thread
from hypertrain.protocol.identity import Hotkey, load_key_file
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import ManifestFileError, manifest_document
from tests.challenge.helpers import commit_body, join_body, manifest_doc, signed
from tests.ops.conftest import LiveService


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_keys_new_writes_a_wallet_hotkey_and_names_btcli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wallets = str(tmp_path / "wallets")
    code, out, err = _run(capsys, "keys", "new", "--wallet-dir", wallets, "--hotkey", "h1")
    path = tmp_path / "wallets" / "default" / "hotkeys" / "h1"
    assert code == 0 and path.stat().st_mode & 0o077 == 0
    assert out.split()[0] == load_key_file(path).ss58_address
    assert "btcli" in err and "hypertrain[chain]" in err
    again = _run(capsys, "keys", "new", "--wallet-dir", wallets, "--hotkey", "h1")
    assert again[0] == 1 and "exists" in again[2] and "Traceback" not in again[2]
    # the wallet flags every signing command takes (and btcli's) name the same file
    btcli = _run(capsys, "keys", "new", "--wallet.path", wallets, "--wallet.hotkey", "h1")
    assert btcli[0] == 1 and str(path) in btcli[2]
    code, out, _ = _run(capsys, "keys", "new", "--wallet-path", wallets, "--hotkey", "h2")
    assert code == 0 and out.split()[1] == str(tmp_path / "wallets" / "default" / "hotkeys" / "h2")


def test_keys_metagraph_writes_a_snapshot_the_service_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wallets = str(tmp_path / "w")
    for name in ("a", "b"):
        assert _run(capsys, "keys", "new", "--wallet-dir", wallets, "--hotkey", name)[0] == 0
    files = [str(tmp_path / "w" / "default" / "hotkeys" / n) for n in ("a", "b")]
    out = tmp_path / "metagraph.json"
    assert _run(capsys, "keys", "metagraph", *files, "--out", str(out))[0] == 0
    snap = parse_snapshot(json.loads(out.read_text()), netuid=100)
    assert sorted(snap.hotkeys.values()) == [1, 2]
    twice = _run(capsys, "keys", "metagraph", files[0], files[0], "--out", str(out))
    assert twice[0] == 1 and "twice" in twice[2]


def test_keys_address_prints_a_role_list_the_service_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wallets = str(tmp_path / "w")
    for name in ("a", "b"):
        assert _run(capsys, "keys", "new", "--wallet-dir", wallets, "--hotkey", name)[0] == 0
    files = [str(tmp_path / "w" / "default" / "hotkeys" / n) for n in ("a", "b")]
    code, out, _ = _run(capsys, "keys", "address", *files)
    assert code == 0
    assert out == ",".join(load_key_file(Path(f)).ss58_address for f in files) + "\n"
    missing = _run(capsys, "keys", "address", str(tmp_path / "nope"))
    assert missing[0] != 0 and "Traceback" not in missing[2]


def test_run_init_writes_a_complete_commented_manifest(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    args = [
        "run",
        "init",
        "--run-id",
        "r1",
        "--preset",
        "tiny",
        "--dataset-dir",
        str(small_dataset),
        "--local",
    ]
    code, printed, _ = _run(capsys, *args, "--h", "4", "--j", "2", "--out", str(out))
    assert code == 0 and "create-run" in printed
    assert "HYPERTRAIN_WITNESS_HOTKEYS" in printed  # no round is paid before a witness
    text = out.read_text()
    doc = manifest_document(text.encode())
    sections = [k for k in RunManifest.model_fields if k != "coordinator" and k in doc]
    assert "warm_start" not in doc  # the recipe has none (protocol.recipe)
    for section in sections:
        assert f"  // {section}: " in text  # each section explains itself
    warm = tmp_path / "warm.json"
    assert _run(capsys, *args, "--warm-start-percent", "1", "--out", str(warm))[0] == 0
    assert "  // warm_start: " in warm.read_text()
    manifest = RunManifest.model_validate(manifest_document(text.encode()))
    # the dispute bond is sized against run init's own pool (docs/mechanism.md): a tenth
    assert manifest.dispute.bond * 10 == manifest.reward.pool_per_round
    assert manifest.round.inner_steps == 4 and manifest.selfcheck_reference
    # the outer step the parity grid picked (docs/parity.md, "The product default")
    assert (manifest.outer.lr, manifest.outer.momentum) == (1.0, 0.0)
    dataset = json.loads((small_dataset / "dataset.json").read_text())
    assert manifest.data.dataset_root == dataset["dataset_root"]
    assert manifest.model.vocab_size == dataset["vocab_size"]
    again = _run(capsys, *args, "--out", str(out))
    assert again[0] == 1 and "--force" in again[2]
    assert not manifest.round.overlap  # overlapped rounds: an option
    code, _, _ = _run(capsys, *args, "--overlap", "--force", "--out", str(out))
    overlapped = RunManifest.model_validate(manifest_document(out.read_bytes()))
    assert code == 0 and overlapped.round.overlap


def test_competition_init_writes_a_spec_create_fills_and_refuses_bad_values(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hypertrain.competition.pool import load_pool
    from hypertrain.competition.spec import CompetitionSpec

    out = tmp_path / "spec.json"
    evaluator = Hotkey.from_seed(b"\x09" * 32).ss58_address
    args = ["competition", "init", "--competition-id", "c1", "--dataset-dir", str(small_dataset)]
    code, printed, err = _run(capsys, *args, "--evaluator", evaluator, "--out", str(out))
    assert code == 0 and "competition create" in printed and evaluator in printed, err
    doc, _ = load_pool(json.loads(out.read_text()), small_dataset)  # what create sends
    spec = CompetitionSpec.model_validate(doc)
    dataset = json.loads((small_dataset / "dataset.json").read_text())
    assert spec.data.dataset_root == dataset["dataset_root"] and spec.evaluators == (evaluator,)
    assert spec.architecture.vocab_size == dataset["vocab_size"]
    assert spec.data.seq_len == dataset["seq_len"]
    again = _run(capsys, *args, "--out", str(out))
    assert again[0] == 1 and "--force" in again[2]
    bad = _run(capsys, *args, "--max-context-length", "4", "--out", str(tmp_path / "b.json"))
    assert bad[0] == 1 and "seq_len exceeds architecture.max_context_length" in bad[2], bad
    bad = _run(capsys, *args, "--batch-pages", "0", "--out", str(tmp_path / "b.json"))
    assert bad[0] == 1 and "data.batch_pages" in bad[2], bad
    nobody = _run(capsys, *args, "--out", str(tmp_path / "n.json"))
    assert nobody[0] == 0 and "HYPERTRAIN_EVALUATOR_HOTKEYS" in nobody[1]  # who scores, said


def test_manifest_file_refuses_what_is_not_a_manifest() -> None:
    with pytest.raises(ManifestFileError):
        manifest_document(b"[1, 2]")
    with pytest.raises(ValueError, match="malformed JSON"):
        manifest_document(b"// only a comment\n{")
    forged = {"body": {"manifest": {}}, "signature": "00" * 64, "version": 1}
    with pytest.raises(ValueError):
        manifest_document(json.dumps(forged).encode())


def _manifest_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.json"
    body = json.dumps(manifest_doc(), indent=2)
    path.write_text("// a comment line, as run init writes them\n" + body, encoding="utf-8")
    return path


def test_create_run_prints_the_coordinator_and_next_steps(
    live_service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svc, manifest = live_service, _manifest_file(tmp_path)
    coord = tmp_path / "coord.ss58"
    code, out, err = _run(
        capsys, "challenge", "create-run", "--service-url", svc.url, "--admin-token-file",
        str(svc.admin_token), "--manifest", str(manifest), "--coordinator-out", str(coord),
    )  # fmt: skip
    assert code == 0, err
    served = httpx.get(f"{svc.url}/v1/runs/run-1/manifest").json()
    assert (
        f"coordinator  {served['signer']}" in out and coord.read_text().strip() == served["signer"]
    )
    assert "next steps" in out and "aggregator run --follow" in out
    assert out.index("aggregator witness --follow") < out.index("aggregator run --follow")
    assert out.index("auditor run --follow") < out.index("hypertrain-miner join")  # auditors first
    assert "dispute.referees is empty" in out  # the manifest names no referee
    assert referee_note(1) == ""  # a manifest naming a referee gets no warning
    assert f"{svc.url}/dashboard/?run=run-1" in out
    code, out, err = _run(
        capsys, "challenge", "create-run", "--service-url", svc.url, "--admin-token-file",
        str(svc.admin_token), "--manifest", str(manifest),
    )  # fmt: skip
    assert code == 1 and err.startswith("error: the service refused (409")
    assert err.count("\n") == 1
    code, out, _ = _run(capsys, "challenge", "status", "--service-url", svc.url)
    assert code == 0 and "is up" in out and "run-1" in out


def test_trainer_export_takes_the_served_manifest_envelope(
    live_service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hypertrain.trainer.blob import encode_model_blob
    from hypertrain.trainer.model import init_params

    svc = live_service
    manifest = str(_manifest_file(tmp_path))
    create = ["challenge", "create-run", "--service-url", svc.url, "--manifest", manifest]
    assert _run(capsys, *create, "--admin-token-file", str(svc.admin_token))[0] == 0
    envelope = tmp_path / "served.json"
    envelope.write_bytes(httpx.get(f"{svc.url}/v1/runs/run-1/manifest").content)
    spec = RunManifest.model_validate(manifest_document(envelope.read_bytes())).model
    blob = tmp_path / "model.bin"
    blob.write_bytes(encode_model_blob(init_params(spec, 1), spec))
    code, _, err = _run(
        capsys, "trainer", "export", str(blob), str(tmp_path / "hf"), "--manifest", str(envelope)
    )
    assert code == 0, err
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["hidden_size"] == spec.d_model


class _NotAService(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._html()

    def do_POST(self) -> None:
        self._html()

    def _html(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>not here</html>")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def wrong_service() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAService)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize(
    "argv",
    [
        ["challenge", "create-run", "--manifest", "{m}", "--admin-token-file", "{t}"],
        ["challenge", "open-round", "--run-id", "r", "--admin-token-file", "{t}"],
        ["challenge", "check-selection", "--run-id", "r", "--round", "0"],
        ["challenge", "status"],
    ],
)
def test_a_down_or_wrong_service_is_one_clear_line(
    argv: list[str], wrong_service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "admin.token"
    token.write_text("a" * 64)
    token.chmod(0o600)
    filled = [a.format(m=_manifest_file(tmp_path), t=token) for a in argv]
    for url, expected in (
        (_closed_port(), "cannot reach the service"),
        (wrong_service, "without JSON"),
    ):
        code, _, err = _run(capsys, *filled, "--service-url", url)
        assert code == 1 and err.startswith("error: ") and expected in err, err
        assert err.count("\n") == 1 and "Traceback" not in err and "Expecting value" not in err


def test_dataset_is_served_and_fetched_against_its_root(
    small_dataset: Path, tmp_path: Path
) -> None:
    server = make_server(small_dataset, "127.0.0.1", 0)
    serve_in_thread(server)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        root = json.loads((small_dataset / "dataset.json").read_text())["dataset_root"]
        assert httpx.get(f"{url}/").status_code == 404  # no listing
        assert httpx.get(f"{url}/../secret").status_code == 404  # only the dataset's files
        got = fetch_dataset(url, tmp_path / "copy", dataset_root=root)
        assert got.descriptor.dataset_root == root
        assert (tmp_path / "copy" / "tokenizer.json").is_file()
        with pytest.raises(DataError, match="the run pins"):
            fetch_dataset(url, tmp_path / "other", dataset_root="ab" * 32)
        assert not (tmp_path / "other" / "dataset.json").exists()
    finally:
        server.shutdown()
        server.server_close()


def test_a_tampered_mirror_is_refused(small_dataset: Path, tmp_path: Path) -> None:
    import shutil

    mirror = tmp_path / "mirror"
    shutil.copytree(small_dataset, mirror)
    shard = next(mirror.glob("shard-*.bin"))
    data = bytearray(shard.read_bytes())
    data[0] ^= 1
    server = make_server(small_dataset, "127.0.0.1", 0)  # checked at start, then tampered under it
    serve_in_thread(server)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    original = (small_dataset / shard.name).read_bytes()
    try:
        (small_dataset / shard.name).write_bytes(bytes(data))
        root = json.loads((small_dataset / "dataset.json").read_text())["dataset_root"]
        with pytest.raises(DataError, match="SHA-256"):
            fetch_dataset(url, tmp_path / "copy", dataset_root=root)
    finally:
        (small_dataset / shard.name).write_bytes(original)
        server.shutdown()
        server.server_close()


def test_open_round_and_check_selection_against_a_live_round(
    live_service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator opens a round, two islands commit, the beacon passes the deadline:
    ``check-selection`` recomputes the published audit selection from public data."""
    svc = live_service
    code, _, err = _run(
        capsys, "challenge", "create-run", "--service-url", svc.url, "--admin-token-file",
        str(svc.admin_token), "--manifest", str(_manifest_file(tmp_path)),
    )  # fmt: skip
    assert code == 0, err
    keys = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(2)]
    for key in keys:
        joined = httpx.post(f"{svc.url}/v1/join", json=signed(key, "join", join_body()))
        assert joined.status_code == 200 and joined.json()["admitted"], joined.text
    code, out, err = _run(
        capsys, "challenge", "open-round", "--service-url", svc.url, "--run-id", "run-1",
        "--admin-token-file", str(svc.admin_token), "--start-model-sha256", "ab" * 32,
        "--start-model-url", "http://relay/blobs/" + "ab" * 32,
    )  # fmt: skip
    assert code == 0 and out.startswith("opened round 0 of run-1") and "2 islands" in out, err
    code, out, err = _run(capsys, "challenge", "check-selection", "--service-url", svc.url,
                          "--run-id", "run-1", "--round", "0")  # fmt: skip
    assert code == 1 and "no audit selection yet" in err
    for key in keys:
        committed = httpx.post(f"{svc.url}/v1/commit", json=signed(key, "commit", commit_body(0)))
        assert committed.status_code == 200, committed.text
    svc.beacon.round += 4  # past the commit deadline: the service selects on its next poll
    deadline = time.monotonic() + 30
    while httpx.get(f"{svc.url}/v1/runs/run-1/rounds").json()[0]["phase"] == "train":
        assert time.monotonic() < deadline, "the service never left the train phase"
        time.sleep(0.05)
    code, out, err = _run(capsys, "challenge", "check-selection", "--service-url", svc.url,
                          "--run-id", "run-1", "--round", "0")  # fmt: skip
    assert code == 0 and "OK: published selection matches" in out, out + err
    db = sqlite3.connect(svc.state_dir / DB_NAME)  # a service that edits what it published
    row = db.execute("SELECT hotkey, envelope FROM audits LIMIT 1").fetchone()
    forged = json.loads(row[1])
    forged["body"]["segments"] = forged["body"]["segments"][-1:]
    db.execute("UPDATE audits SET envelope = ? WHERE hotkey = ?", (json.dumps(forged), row[0]))
    db.commit()
    db.close()
    code, out, err = _run(capsys, "challenge", "check-selection", "--service-url", svc.url,
                          "--run-id", "run-1", "--round", "0")  # fmt: skip
    assert code == 1 and "audit-assignment record does not verify" in err, out + err
