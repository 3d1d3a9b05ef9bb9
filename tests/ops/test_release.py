"""Release hygiene: licence files, changelog, and a hash-locked install that matches the pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]


def _project() -> dict[str, object]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project: dict[str, object] = doc["project"]
    return project


def _locked() -> dict[str, tuple[str, int]]:
    """name -> (version, number of sha256 hashes) of every pin in requirements.lock."""
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    pins: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if head:
            hashes = len(re.findall(r"--hash=sha256:[0-9a-f]{64}", block))
            pins[canonicalize_name(head.group(1))] = (head.group(2), hashes)
    return pins


def test_licence_notice_and_changelog_exist() -> None:
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert _project()["license"] == "Apache-2.0"
    assert "Apache License, Version 2.0" in (ROOT / "NOTICE").read_text(encoding="utf-8")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog and "docs/protocol.md" in changelog


def test_the_lock_pins_every_dependency_at_its_pyproject_version_with_hashes() -> None:
    project = _project()
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    wanted = [Requirement(r) for r in [*project["dependencies"], *extras["dev"]]]  # type: ignore[misc]
    pins = _locked()
    for req in wanted:
        version, hashes = pins[canonicalize_name(req.name)]
        assert req.specifier.contains(version.split("+")[0]), (req, version)
        assert hashes >= 1, req.name
    assert all(h >= 1 for _, h in pins.values()), "a pin without a hash"
    assert pins["torch"][0] == "2.13.0+cpu" and not any(n.startswith("nvidia") for n in pins)


def test_make_install_uses_the_lock_with_hashes() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    install = makefile.split("$(STAMP): pyproject.toml $(LOCK)", 1)[1].split("\n\n", 1)[0]
    assert "--require-hashes" in install and "-r $(LOCK)" in install and "--no-deps" in install
    assert "TORCH_INDEX ?= https://download.pytorch.org/whl/cpu" in makefile
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert "/opt/" not in lock and "file://" not in lock and "/tmp/" not in lock


def test_requires_python_admits_what_the_pins_support() -> None:
    spec = SpecifierSet(str(_project()["requires-python"]))
    assert all(v in spec for v in ("3.11.0", "3.12.4", "3.13.1", "3.14.0"))
    assert "3.10.12" not in spec and "3.15.0" not in spec
