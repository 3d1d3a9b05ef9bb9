"""Generated contract docs: ``make docs`` (``python -m hypertrain.ops.docs [--check]``).

Two parts of the documentation are written by this module and never by hand:

* ``docs/schemas/<domain>.schema.json``: the JSON Schema of every signed message body
  (the protocol's domains, the dispute game's and the competition's), the envelope,
  the run manifest and the competition spec, from their pydantic models (the files
  ``python -m hypertrain.ops.schemas DIR`` writes);
* the route index at the end of ``docs/challenge-routes.md``: every route the challenge
  service's app serves, with its auth, body, answer model and the first paragraph of
  its docstring, between two marker lines (the prose above them is hand-written).

``--check`` writes nothing and exits 1, naming the stale files, when the checked-in
docs differ from what the code generates; a test runs it, so a route or message added
without regenerating fails the suite.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from fastapi import FastAPI
from fastapi.routing import APIRoute

from hypertrain.ops.schemas import schema_files, write_schemas

ROOT: Final = Path("docs")
ROUTES_DOC: Final = "challenge-routes.md"
BEGIN: Final = "<!-- generated routes: do not edit below; run `make docs` -->"
END: Final = "<!-- end of generated routes -->"
_AUTH: Final = {
    "require_admin": "admin token",
    "require_worker": "worker token",
    "require_internal": "internal token",
}


def service_app() -> FastAPI:
    """The challenge service's app, built as production builds it (nothing is started)."""
    from hypertrain.challenge.app import create_app
    from hypertrain.challenge.settings import Secret, Settings
    from hypertrain.protocol.identity import Hotkey

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            state_dir=Path(tmp) / "state",
            internal_token=Secret("docs-generator-token"),
            coordinator_key=Hotkey.from_seed(bytes(32)),
            metagraph_source="file",
            metagraph_file=Path(tmp) / "metagraph.json",
        )
        return create_app(settings)


def _api_routes(routes: list[Any], prefix: str) -> Iterator[tuple[str, APIRoute]]:
    """Every API route with its full path, through the app's included routers."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
        elif hasattr(route, "original_router"):  # an included router
            inner = prefix + str(getattr(route.include_context, "prefix", ""))
            yield from _api_routes(route.original_router.routes, inner)


def _calls(dependant: Any) -> Iterator[str]:
    for dep in dependant.dependencies:
        if dep.call is not None:
            yield getattr(dep.call, "__name__", "")
        yield from _calls(dep)


def _auth(route: APIRoute) -> str:
    names = set(_calls(route.dependant))
    found = [text for name, text in _AUTH.items() if name in names]
    if _body(route) == "Envelope":
        found.append("signed envelope")
    return " + ".join(found) or "none"


def _model_name(annotation: Any) -> str:
    if annotation is None:
        return "—"
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is not None and args:
        inner = ", ".join(_model_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return str(getattr(annotation, "__name__", annotation))


def _body(route: APIRoute) -> str:
    return (
        _model_name(route.body_field.field_info.annotation) if route.body_field is not None else "—"
    )


def _answer(route: APIRoute) -> str:
    model = route.response_model
    if model is None:
        model = (route.responses.get(200) or {}).get("model")
    if model is None:
        model = inspect.signature(route.endpoint).return_annotation
        model = None if model is inspect.Signature.empty else model
    return _model_name(model)


def _summary(route: APIRoute) -> str:
    doc = inspect.getdoc(route.endpoint) or ""
    first = doc.split("\n\n", 1)[0]
    return " ".join(first.split()).replace("|", "\\|") or "—"


def routes_block(app: FastAPI) -> str:
    """The generated route index (markdown), grouped by the routers' tags."""
    rows: dict[str, list[str]] = {}
    for path, route in _api_routes(app.routes, ""):
        tag = str(route.tags[0]) if route.tags else "pages"
        for method in sorted((route.methods or set()) - {"HEAD"}):
            rows.setdefault(tag, []).append(
                f"| `{method} {path}` | {_auth(route)} | {_body(route)} | {_answer(route)}"
                f" | {_summary(route)} |"
            )
    lines = [BEGIN, "", "## Every route (generated from the app)", ""]
    lines.append(
        "Also under the proxy prefix `/challenge/<slug>/`. Bodies and answers are the models"
        " of `hypertrain.api.models` (signed bodies: `docs/schemas/`)."
    )
    for tag in sorted(rows):
        lines += ["", f"### {tag}", "", "| route | auth | body | answer | what it does |"]
        lines += ["| --- | --- | --- | --- | --- |", *rows[tag]]
    return "\n".join([*lines, "", END]) + "\n"


def routes_doc(current: str, block: str) -> str:
    """``current`` with its generated block replaced by ``block`` (appended if absent)."""
    if BEGIN in current:
        head = current.split(BEGIN, 1)[0]
        tail = current.split(END, 1)[1] if END in current else ""
        return head + block + tail.lstrip("\n")
    return current.rstrip("\n") + "\n\n" + block


def routes_file(root: Path) -> tuple[Path, str]:
    """The route index document under ``root`` and the text it must hold."""
    doc = root / ROUTES_DOC
    return doc, routes_doc(doc.read_text(encoding="utf-8"), routes_block(service_app()))


def expected_files(root: Path) -> dict[Path, str]:
    """Every generated file under ``root`` with the text it must hold."""
    files = {root / "schemas" / name: text for name, text in schema_files().items()}
    doc, text = routes_file(root)
    files[doc] = text
    return files


def stale(root: Path) -> list[str]:
    """Generated files that differ from the checked-in ones, and schemas nobody generates."""
    files = expected_files(root)
    changed = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
    extra = [str(p) for p in (root / "schemas").glob("*.schema.json") if p not in files]
    return sorted(changed + extra)


def write(root: Path) -> list[Path]:
    """Write every generated file (the schemas as ``python -m hypertrain.ops.schemas``
    does); remove schemas no model produces any more."""
    doc, text = routes_file(root)
    current = set(schema_files())
    for path in (root / "schemas").glob("*.schema.json"):
        if path.name not in current:
            path.unlink()
    written = write_schemas(root / "schemas")
    doc.write_text(text, encoding="utf-8")
    return sorted([*written, doc])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hypertrain.ops.docs", description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT, help="the docs directory")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(args.root)
        for name in problems:
            sys.stderr.write(f"stale: {name} (run `make docs`)\n")
        return 1 if problems else 0
    for path in write(args.root):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
