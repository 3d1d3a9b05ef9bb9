"""``hypertrain protocol``: operator tools for debugging messages.

``canon FILE`` prints canonical bytes (``--hash`` their SHA-256);
``verify FILE`` checks a signed envelope and says who signed it or why it fails.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.envelope import decode_envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError, ProtocolError
from hypertrain.protocol.messages import DOMAINS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("protocol", help="canonical JSON and signed envelopes")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    canon = sub.add_parser("canon", help="print the canonical (RFC 8785) bytes of a JSON file")
    canon.add_argument("file", type=Path, help="JSON document ('-' for standard input)")
    canon.add_argument("--hash", action="store_true", help="print the SHA-256 instead")
    canon.set_defaults(func=_canon)

    verify = sub.add_parser("verify", help="verify a signed envelope and say who signed it")
    verify.add_argument("file", type=Path, help="envelope JSON ('-' for standard input)")
    verify.add_argument("--domain", help="require this domain (default: the envelope's own)")
    verify.add_argument("--run-id", help="require this run id")
    verify.add_argument("--current-round", type=int, help="beacon round now, to check expiry")
    verify.set_defaults(func=_verify)


def _read(path: Path) -> bytes:
    return sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()


def _canon(args: argparse.Namespace) -> int:
    data = canonical_bytes(parse_json(_read(args.file), max_bytes=1 << 30))
    if args.hash:
        sys.stdout.write(hashlib.sha256(data).hexdigest() + "\n")
    else:
        sys.stdout.buffer.write(data + b"\n")
    return 0


def _verify(args: argparse.Namespace) -> int:
    try:
        env = decode_envelope(_read(args.file))
        verified = open_envelope(
            env,
            domain=args.domain or env.domain,
            run_id=args.run_id,
            current_round=args.current_round,
        )
        body_model = DOMAINS.get(env.domain)
        if body_model is not None:
            body_model.model_validate(env.body)
    except EnvelopeError as exc:
        sys.stdout.write(f"REJECTED ({exc.reason}): {exc.detail}\n")
        return 1
    except (ProtocolError, ValueError) as exc:
        sys.stdout.write(f"REJECTED (bad_body): {exc}\n")
        return 1
    e = verified.envelope
    sys.stdout.write(
        f"OK: signed by {e.signer}\n"
        f"  domain        {e.domain}\n"
        f"  run           {e.run_id}\n"
        f"  nonce         {e.nonce}\n"
        f"  expiry_round  {e.expiry_round}\n"
        f"  body sha256   {hashlib.sha256(canonical_bytes(e.body)).hexdigest()}\n"
    )
    return 0
