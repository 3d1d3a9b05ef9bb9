"""Settings from the environment: token and key files are refused when unsafe or unusable."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from hypertrain.challenge.errors import SettingsError
from hypertrain.challenge.settings import read_token_file, settings_from_env
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import write_private, write_secrets

WITNESS = Hotkey.from_seed(b"\x0b" * 32).ss58_address


def _env(tmp_path: Path) -> dict[str, str]:
    files = write_secrets(tmp_path)
    return {
        "CHALLENGE_STATE_DIR": str(tmp_path / "state"),
        "CHALLENGE_INTERNAL_TOKEN_FILE": str(files["internal"]),
        "CHALLENGE_ADMIN_TOKEN_FILE": str(files["admin"]),
        "CHALLENGE_WORKER_TOKEN_FILE": str(files["worker"]),
        "HYPERTRAIN_COORD_KEY_FILE": str(files["coord"]),
        "CHALLENGE_MASTER_URL": "http://127.0.0.1:9",
        "HYPERTRAIN_WITNESS_HOTKEYS": WITNESS,  # required off a local network
    }


def test_documented_environment_builds_settings(tmp_path: Path) -> None:
    s = settings_from_env(_env(tmp_path))
    assert s.slug == "hypertrain" and s.netuid == 100 and s.metagraph_source == "master"
    assert "i" * 32 not in repr(s)  # tokens never appear in a repr (so never in a log)
    assert s.internal_token.matches("i" * 32) and not s.internal_token.matches("i" * 31)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_token_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    env = _env(tmp_path)
    Path(env["CHALLENGE_INTERNAL_TOKEN_FILE"]).chmod(mode)
    with pytest.raises(SettingsError, match="readable by group or others"):
        settings_from_env(env)


def test_missing_empty_and_placeholder_tokens_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        read_token_file(tmp_path / "nope", "X")
    with pytest.raises(SettingsError, match="is empty"):
        read_token_file(write_private(tmp_path / "empty", "\n"), "X")
    with pytest.raises(SettingsError, match="placeholder"):
        read_token_file(write_private(tmp_path / "short", "changeme"), "X")


def test_required_variables_and_bad_key(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for name in (
        "CHALLENGE_STATE_DIR",
        "CHALLENGE_INTERNAL_TOKEN_FILE",
        "HYPERTRAIN_COORD_KEY_FILE",
        "CHALLENGE_MASTER_URL",
    ):
        partial = {k: v for k, v in env.items() if k != name}
        with pytest.raises(SettingsError):
            settings_from_env(partial)
    write_private(Path(env["HYPERTRAIN_COORD_KEY_FILE"]), "zz" * 32)
    with pytest.raises(SettingsError, match="not hex"):
        settings_from_env(env)
    write_private(Path(env["HYPERTRAIN_COORD_KEY_FILE"]), secrets.token_hex(16))
    with pytest.raises(SettingsError, match="expected 32"):
        settings_from_env(env)


def test_bad_numbers_and_sources(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for name, value in [
        ("CHALLENGE_NETUID", "x"),
        ("HYPERTRAIN_BEACON_POLL_S", "-1"),
        ("HYPERTRAIN_METAGRAPH_SOURCE", "moon"),
        ("HYPERTRAIN_WORKER_HOTKEYS", "notakey"),
        ("CHALLENGE_SLUG", "a/b"),
    ]:
        with pytest.raises(SettingsError):
            settings_from_env({**env, name: value})


def test_misspelt_and_unknown_variables_are_refused(tmp_path: Path) -> None:
    env = _env(tmp_path)
    names = (
        "CHALLENGE_ADMIN_TOKEN_FIEL",
        "HYPERTRAIN_BEACON_POLL",
        "CHALLENGE_DEBUG",
        "HYPERTRAIN_AGGREGATOR_HOTKEY",  # a typo would leave the service taking no tape
    )
    for name in names:
        with pytest.raises(SettingsError, match=f"unknown setting.*{name}"):
            settings_from_env({**env, name: "1"})
    for name in (
        "HYPERTRAIN_WITNESS_HOTKEYS",
        "HYPERTRAIN_EVALUATOR_HOTKEYS",
        "HYPERTRAIN_AGGREGATOR_HOTKEYS",
    ):
        with pytest.raises(SettingsError, match=f"^{name}: "):  # the bad key's own variable
            settings_from_env({**env, name: "not-a-key"})
    # other programs' variables (and the rest of the environment) are not the service's
    assert settings_from_env({**env, "HYPERTRAIN_CHROMIUM": "/x", "PATH": "/bin"}).netuid == 100


def test_wrong_types_name_the_variable(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with pytest.raises(SettingsError, match="CHALLENGE_NETUID"):
        settings_from_env({**env, "CHALLENGE_NETUID": "-3"})
    with pytest.raises(SettingsError, match="HYPERTRAIN_METAGRAPH_SOURCE"):
        settings_from_env({**env, "HYPERTRAIN_METAGRAPH_SOURCE": "moon"})


def test_tape_witness_settings(tmp_path: Path) -> None:
    env = _env(tmp_path)
    s = settings_from_env(env)
    assert (s.tape_witnesses, s.witness_hotkeys) == (1, frozenset({WITNESS}))  # the default
    keys = [Hotkey.from_seed(bytes([i]) * 32).ss58_address for i in (1, 2)]
    listed = {**env, "HYPERTRAIN_TAPE_WITNESSES": "2", "HYPERTRAIN_WITNESS_HOTKEYS": ",".join(keys)}
    s = settings_from_env(listed)
    assert (s.tape_witnesses, s.witness_hotkeys) == (2, frozenset(keys))
    assert (
        s.witness_wait_rounds,
        settings_from_env({**listed, "HYPERTRAIN_WITNESS_WAIT_ROUNDS": "5"}).witness_wait_rounds,
    ) == (20, 5)
    with pytest.raises(SettingsError, match="no round would settle"):
        settings_from_env({**listed, "HYPERTRAIN_TAPE_WITNESSES": "3"})
    for name, value in [("HYPERTRAIN_TAPE_WITNESSES", "-1"), ("HYPERTRAIN_WITNESS_HOTKEYS", "x"),
                        ("HYPERTRAIN_TAPE_WITNESS", "1"),
                        ("HYPERTRAIN_WITNESS_WAIT_ROUNDS", "0")]:  # fmt: skip
        with pytest.raises(SettingsError):
            settings_from_env({**env, name: value})


def test_witnesses_are_required_off_a_local_network(tmp_path: Path) -> None:
    """Off a local network a round settles only on a tape the operator's witnesses
    recomputed: no witness key, or no witness, is a configuration error naming the
    variable; a local network (file metagraph) may opt out explicitly, or leave the
    witness list unset."""
    env = {k: v for k, v in _env(tmp_path).items() if k != "HYPERTRAIN_WITNESS_HOTKEYS"}
    with pytest.raises(SettingsError, match=r"^HYPERTRAIN_WITNESS_HOTKEYS names no tape witness"):
        settings_from_env(env)
    for source in ("master", "chain"):
        off = {**env, "HYPERTRAIN_METAGRAPH_SOURCE": source, "HYPERTRAIN_TAPE_WITNESSES": "0"}
        with pytest.raises(SettingsError, match="only a local network"):
            settings_from_env({**off, "HYPERTRAIN_WITNESS_HOTKEYS": WITNESS})
    graph = tmp_path / "metagraph.json"
    local = {**env, "HYPERTRAIN_METAGRAPH_SOURCE": "file", "HYPERTRAIN_METAGRAPH_FILE": str(graph)}
    assert settings_from_env(local).tape_witnesses == 1  # on by default there too
    assert settings_from_env({**local, "HYPERTRAIN_TAPE_WITNESSES": "0"}).tape_witnesses == 0


ROLE_LISTS = ("HYPERTRAIN_AGGREGATOR_HOTKEYS", "HYPERTRAIN_WITNESS_HOTKEYS",
              "HYPERTRAIN_EVALUATOR_HOTKEYS")  # fmt: skip


@pytest.mark.parametrize(
    ("first", "second"),
    [(a, b) for i, a in enumerate(ROLE_LISTS) for b in ROLE_LISTS[i + 1 :]],
)
def test_a_key_named_in_two_role_lists_is_refused(tmp_path: Path, first: str, second: str) -> None:
    """One key, one role: a key named for two roles could act in neither (facts/roles.py
    bars each role from the other), so the service refuses to start, naming both lists."""
    env = _env(tmp_path)
    key, other = (Hotkey.from_seed(bytes([i]) * 32).ss58_address for i in (7, 8))
    with pytest.raises(SettingsError, match=f"{key} named in both ") as refused:
        settings_from_env({**env, first: key, second: f"{other},{key}"})
    assert first in str(refused.value) and second in str(refused.value)
    apart = settings_from_env({**env, first: key, second: other})
    assert {key, other} <= apart.aggregator_hotkeys | apart.witness_hotkeys | (
        apart.evaluator_hotkeys
    )


def test_the_aggregator_keys_are_read_and_default_to_none(tmp_path: Path) -> None:
    """Unset, no key is an aggregator (the service then takes no tape: facts/roles.py);
    the worker list may name the aggregator keys too."""
    env = _env(tmp_path)
    assert settings_from_env(env).aggregator_hotkeys == frozenset()
    key = Hotkey.from_seed(b"\x09" * 32).ss58_address
    s = settings_from_env(
        {**env, "HYPERTRAIN_AGGREGATOR_HOTKEYS": key, "HYPERTRAIN_WORKER_HOTKEYS": key}
    )
    assert s.aggregator_hotkeys == s.worker_hotkeys == frozenset({key})


def test_standby_jurors_must_be_listed_workers(tmp_path: Path) -> None:
    """A standby juror is an auditor that re-audits only: a key outside the worker list
    could never post the re-audit it stands by for, so the setting is refused."""
    env = _env(tmp_path)
    worker, juror = (Hotkey.from_seed(bytes([i]) * 32).ss58_address for i in (3, 4))
    listed = {**env, "HYPERTRAIN_WORKER_HOTKEYS": f"{worker},{juror}"}
    assert settings_from_env(listed).standby_hotkeys == frozenset()
    s = settings_from_env({**listed, "HYPERTRAIN_STANDBY_HOTKEYS": juror})
    assert s.standby_hotkeys == frozenset({juror})
    outsider = Hotkey.from_seed(b"\x05" * 32).ss58_address
    with pytest.raises(SettingsError, match="not in HYPERTRAIN_WORKER_HOTKEYS"):
        settings_from_env({**listed, "HYPERTRAIN_STANDBY_HOTKEYS": outsider})
    with pytest.raises(SettingsError, match=r"^HYPERTRAIN_STANDBY_HOTKEYS: "):
        settings_from_env({**listed, "HYPERTRAIN_STANDBY_HOTKEYS": "not-a-key"})
    with pytest.raises(SettingsError, match="unknown setting"):
        settings_from_env({**listed, "HYPERTRAIN_STANDBY_HOTKEY": juror})
