"""``python -m hypertrain.honeypot.commit LIST.json``: a honeypot list's commitment.

LIST.json is a :class:`~hypertrain.protocol.honeypots.HoneypotList` (``salt`` and
``entries``). Without options the printed hex digest goes into the manifest's
``honeypots.commitment`` (period 0). With ``--period N --first-round A --last-round B``
it prints the body to post to ``POST /admin/v1/runs/{run_id}/honeypots/periods`` before
round A opens. After the period's last round is final, post the same LIST.json to
``POST /admin/v1/runs/{run_id}/honeypots`` (or ``.../honeypots/periods/N/reveal``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from hypertrain.protocol.honeypots import HoneypotList, HoneypotPeriod, commitment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hypertrain.honeypot.commit")
    parser.add_argument("list", type=Path, help="the honeypot list (JSON: salt, entries)")
    parser.add_argument("--period", type=int, help="print the period body for this period")
    parser.add_argument("--first-round", type=int, default=0, help="the period's first round")
    parser.add_argument("--last-round", type=int, default=0, help="the period's last round")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    honeypots = _read_list(args.list)
    if honeypots is None:
        return 1
    digest = commitment(honeypots)
    if args.period is None:
        sys.stdout.write(digest + "\n")
        return 0
    body = HoneypotPeriod(
        period=args.period,
        first_round=args.first_round,
        last_round=args.last_round,
        commitment=digest,
    )
    sys.stdout.write(body.model_dump_json() + "\n")
    return 0


def _read_list(path: Path) -> HoneypotList | None:
    """The list in ``path``, or None after one ``error:`` line naming what is wrong."""
    try:
        return HoneypotList.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        problem = f"cannot read {path}: {exc.strerror}"
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in exc.errors()
        )
        shape = "salt: 64 hex digits; entries: hotkey, role, strategy"
        problem = f"{path} is not a honeypot list ({shape}): {fields}"
    sys.stderr.write(f"error: {problem}\n")
    return None


if __name__ == "__main__":
    sys.exit(main())
