"""``python -m hypertrain.honeypot.commit LIST.json``: the commitment to put in the manifest.

LIST.json is a :class:`~hypertrain.protocol.honeypots.HoneypotList` (``salt`` and
``entries``); the printed hex digest goes into ``honeypots.commitment``. After the
reveal round, post the same file to ``POST /admin/v1/runs/{run_id}/honeypots``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypertrain.protocol.honeypots import HoneypotList, commitment


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m hypertrain.honeypot.commit LIST.json\n")
        return 2
    honeypots = HoneypotList.model_validate_json(Path(args[0]).read_text(encoding="utf-8"))
    sys.stdout.write(commitment(honeypots) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
