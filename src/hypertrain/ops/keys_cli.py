"""``hypertrain keys``: throwaway hotkeys and metagraph snapshots for tests and local networks.

``keys new`` writes an unencrypted sr25519 hotkey in the Bittensor wallet layout
(``<wallet-dir>/<wallet>/hotkeys/<hotkey>``). Production keys come from ``btcli``
(``btcli wallet new_hotkey``), which the ``chain`` extra installs
(``pip install 'hypertrain[chain]'``); every Hypertrain command reads either.
``keys metagraph`` writes a snapshot file listing hotkeys with UIDs, the format the
service reads with ``HYPERTRAIN_METAGRAPH_SOURCE=file``. ``keys address`` prints the SS58
addresses of key files, comma-separated: the form of the service's role lists
(``HYPERTRAIN_AGGREGATOR_HOTKEYS``, ``HYPERTRAIN_WORKER_HOTKEYS``, ...).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path
from typing import Any

from hypertrain.protocol.identity import (
    DEFAULT_WALLET_PATH,
    load_key_file,
    wallet_hotkey_path,
    write_key_file,
)
from hypertrain.protocol.keyargs import WALLET_FLAGS

PRODUCTION_NOTE = (
    "throwaway key for tests and local networks; production keys come from btcli"
    " (pip install 'hypertrain[chain]', then btcli wallet new_hotkey)"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("keys", help="throwaway hotkeys and metagraph snapshots")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    new = sub.add_parser("new", help="write a new unencrypted hotkey in the wallet layout")
    # the same spellings as every signing command (and btcli), plus --wallet-dir
    new.add_argument(*WALLET_FLAGS["wallet"], dest="wallet", default="default",
                     help="wallet name (default 'default')")  # fmt: skip
    new.add_argument(*WALLET_FLAGS["hotkey"], dest="hotkey", required=True, help="hotkey name")
    new.add_argument("--wallet-dir", *WALLET_FLAGS["wallet_path"], dest="wallet_dir",
                     default=DEFAULT_WALLET_PATH,
                     help=f"wallets root (default {DEFAULT_WALLET_PATH})")  # fmt: skip
    new.add_argument("--force", action="store_true", help="replace an existing key file")
    new.set_defaults(func=_new)
    meta = sub.add_parser("metagraph", help="write a metagraph snapshot listing key files")
    meta.add_argument("key_files", type=Path, nargs="+", help="hotkey files, UIDs in this order")
    meta.add_argument("--out", type=Path, required=True, help="snapshot JSON to write")
    meta.add_argument("--netuid", type=int, default=100, help="subnet (default 100)")
    meta.add_argument("--epoch", type=int, default=1, help="snapshot epoch (default 1)")
    meta.add_argument("--first-uid", type=int, default=1, help="UID of the first key")
    meta.set_defaults(func=_metagraph)
    address = sub.add_parser("address", help="print the SS58 addresses of key files")
    address.add_argument("key_files", type=Path, nargs="+", help="hotkey files")
    address.set_defaults(func=_address)


def _new(args: argparse.Namespace) -> int:
    path = wallet_hotkey_path(args.wallet, args.hotkey, args.wallet_dir)
    if path.exists() and not args.force:
        raise ValueError(f"{path} exists (pass --force to replace it)")
    key = write_key_file(secrets.token_bytes(32), path)
    sys.stdout.write(f"{key.ss58_address}  {path}\n")
    sys.stderr.write(f"note: {PRODUCTION_NOTE}\n")
    return 0


def snapshot(hotkeys: list[str], *, netuid: int, epoch: int, first_uid: int) -> dict[str, Any]:
    """A snapshot document: ``{"epoch", "block", "netuid", "hotkeys": {ss58: uid}}``."""
    return {
        "epoch": epoch,
        "block": epoch,
        "netuid": netuid,
        "hotkeys": {h: first_uid + n for n, h in enumerate(hotkeys)},
    }


def _metagraph(args: argparse.Namespace) -> int:
    hotkeys = [load_key_file(p).ss58_address for p in args.key_files]
    if len(set(hotkeys)) != len(hotkeys):
        raise ValueError("the same hotkey is listed twice")
    doc = snapshot(hotkeys, netuid=args.netuid, epoch=args.epoch, first_uid=args.first_uid)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {args.out}: {len(hotkeys)} hotkeys on netuid {args.netuid}\n")
    return 0


def _address(args: argparse.Namespace) -> int:
    """One line: the files' SS58 addresses, comma-separated (a role list's value)."""
    sys.stdout.write(",".join(load_key_file(p).ss58_address for p in args.key_files) + "\n")
    return 0
