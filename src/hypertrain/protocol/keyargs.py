"""The signing key of a command: the same flags, in btcli's spelling too, on every role.

Every command that signs (miner, auditor, evaluator, aggregator, referee, relay put)
takes its hotkey either from an explicit ``--key-file`` or from the standard Bittensor
wallet layout (``<wallet.path>/<wallet.name>/hotkeys/<wallet.hotkey>``). The wallet
flags accept btcli's own spelling (``--wallet.name``, ``--wallet.hotkey``,
``--wallet.path``) beside this project's (``--wallet``, ``--hotkey``,
``--wallet-path``), so a command line copied from btcli works unchanged.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from hypertrain.protocol.errors import IdentityError
from hypertrain.protocol.identity import (
    DEFAULT_WALLET_PATH,
    Hotkey,
    load_key_file,
    wallet_hotkey_path,
)

# dest -> the option strings of that setting (this project's first, then btcli's)
WALLET_FLAGS: Final[dict[str, tuple[str, ...]]] = {
    "wallet": ("--wallet", "--wallet.name", "--wallet-name", "--wallet_name"),
    "hotkey": ("--hotkey", "--wallet.hotkey", "--wallet-hotkey", "--wallet_hotkey"),
    "wallet_path": ("--wallet-path", "--wallet.path", "--wallet_path"),
}
WALLET_HELP: Final[dict[str, str]] = {
    "wallet": "Bittensor wallet name (btcli: --wallet.name; default 'default')",
    "hotkey": "hotkey name inside the wallet (btcli: --wallet.hotkey; default 'default')",
    "wallet_path": f"root of the wallets (btcli: --wallet.path; default {DEFAULT_WALLET_PATH})",
}


def add_wallet_flags(parser: argparse.ArgumentParser, *, what: str = "hotkey") -> None:
    """``--key-file`` and the wallet flags (all optional; defaults are btcli's)."""
    parser.add_argument(
        "--key-file", type=Path, help=f"explicit {what} file (instead of the wallet flags)"
    )
    for dest, flags in WALLET_FLAGS.items():
        parser.add_argument(*flags, dest=dest, default=None, help=WALLET_HELP[dest])


def key_path(args: argparse.Namespace) -> Path:
    """The hotkey file the flags name: ``--key-file``, else the wallet's hotkey file."""
    key_file: Path | None = getattr(args, "key_file", None)
    wallet_given = any(getattr(args, dest, None) is not None for dest in WALLET_FLAGS)
    if key_file is not None:
        if wallet_given:
            raise IdentityError("give either --key-file or the wallet flags, not both")
        return Path(key_file).expanduser()
    return wallet_hotkey_path(
        args.wallet or "default", args.hotkey or "default", args.wallet_path or DEFAULT_WALLET_PATH
    ).expanduser()


def key_from_args(args: argparse.Namespace) -> Hotkey:
    """Load the signing hotkey the flags name (a missing file is one clear line)."""
    path = key_path(args)
    if not path.is_file():
        raise IdentityError(
            f"no hotkey file at {path}: create it with `btcli wallet new_hotkey` (or"
            " `hypertrain keys new` for a local network), or point --key-file or"
            " --wallet.name/--wallet.hotkey/--wallet.path at it"
        )
    return load_key_file(path)
