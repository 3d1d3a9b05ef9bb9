"""Recompute the known-answer vectors under tests/assets/vectors/ and write them.

    python scripts/freeze_vectors.py           # rewrite every vector file
    python scripts/freeze_vectors.py --check   # exit 1 and list the vectors that differ

Run it only when a byte format is meant to change, commit the new files in the same
commit as the change, and add a line to the changelog in docs/protocol.md saying why.
The answers are computed in a child process with a pinned CPU profile
(tests/known_answers.py), so they do not depend on the machine that freezes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.known_answers import PROFILE, RECIPES, VECTORS_DIR, compute_all


def render(name: str, answer: dict[str, object]) -> str:
    doc = {"vector": name, "profile": PROFILE, "answer": answer}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    args = parser.parse_args(argv)
    answers = compute_all()
    differ = []
    for name in RECIPES:
        path = VECTORS_DIR / f"{name}.json"
        text = render(name, answers[name])
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            differ.append(name)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    verb = "differ" if args.check else "rewritten"
    print(f"{len(differ)} of {len(RECIPES)} vectors {verb}: {', '.join(differ) or '-'}")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
