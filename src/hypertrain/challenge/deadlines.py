"""Admission deadlines and memory caps per device class: how long an island has to answer
its challenge, and the most memory one of its devices may claim.

The memory proof (docs/mechanism.md, "Memory proof") is only as strong as its deadline:
a device that holds part of its table can recompute the rest, or page it from slower
storage, if it is given the time. So the answer deadline grows with the memory claimed
and is set per device class, from the class the island declares in its join request
(``DeviceReport.device_class``)::

    seconds(class, claim) = overhead_s + s_per_gib × (largest per-device claim in GiB)

The devices of an island answer in parallel, so the largest claim sizes the deadline.
A class matches the rule with the longest prefix of its name; a class no rule matches
gets the strictest deadline (the shortest any rule gives for that claim), so inventing a
class name never buys time. The deadline is counted in whole beacon rounds after the
seed round (at least one), and never exceeds the run's signed
``admission.answer_window_rounds``: the manifest's window is the run's outer bound, this
table narrows it per class. The table is service configuration, not part of the signed
manifest (``HYPERTRAIN_ADMISSION_DEADLINES_FILE``, :func:`load_deadlines`).

Each rule also caps the memory one device of its classes may claim (``max_claim_gib``:
what a device of the class can really hold). A claim above its class's cap is refused at
the join (``claim_too_large``), before anyone computes anything, and a class no rule
names gets the smallest cap; so the worker's check, which is sized by the claim, is
bounded per class before the island has paid anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

GIB: Final = 1 << 30
DEFAULT_CAP_GIB: Final = 64.0  # a rule's cap when it names none


@dataclass(frozen=True, slots=True)
class ClassDeadline:
    """One rule: device classes starting with ``prefix`` are in ``tier``."""

    prefix: str
    tier: str
    overhead_s: float  # seed fetch, the compute workload, the upload
    s_per_gib: float  # building and walking one GiB of table on the tier's slowest device
    max_claim_gib: float = DEFAULT_CAP_GIB  # the most memory one device of the class may claim

    def seconds(self, claim_bytes: int) -> float:
        """The deadline, in seconds after the seed round, for a per-device claim."""
        return self.overhead_s + self.s_per_gib * claim_bytes / GIB


@dataclass(frozen=True, slots=True)
class Deadline:
    """What an island of one class and claim is given."""

    tier: str
    known: bool  # False: no rule names the class, so it got the strictest
    seconds: float
    rounds: int  # beacon rounds after the seed round (at least 1)


@dataclass(frozen=True, slots=True)
class DeadlineTable:
    """Rules matched by the longest prefix; an unknown class gets the strictest rule."""

    rules: tuple[ClassDeadline, ...]

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError("a deadline table needs at least one rule")
        prefixes = [r.prefix for r in self.rules]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError("deadline rules repeat a prefix")
        for rule in self.rules:
            if not rule.prefix or rule.overhead_s <= 0 or rule.s_per_gib < 0:
                raise ValueError(f"deadline rule {rule.prefix!r} needs a prefix and overhead > 0")
            if not 0 < rule.max_claim_gib <= 1024:
                raise ValueError(f"deadline rule {rule.prefix!r} caps claims at 0 to 1024 GiB")

    def rule_for(self, device_class: str, claim_bytes: int) -> tuple[ClassDeadline, bool]:
        """The rule of the longest matching prefix (and True), else the strictest rule for
        this claim (and False)."""
        matching = [r for r in self.rules if device_class.startswith(r.prefix)]
        if matching:
            return max(matching, key=lambda r: len(r.prefix)), True
        return min(self.rules, key=lambda r: (r.seconds(claim_bytes), r.prefix)), False

    def max_claim_bytes(self, device_class: str) -> int:
        """The cap of the longest matching prefix, else the smallest cap of any rule."""
        matching = [r for r in self.rules if device_class.startswith(r.prefix)]
        if matching:
            rule = max(matching, key=lambda r: len(r.prefix))
            return int(rule.max_claim_gib * GIB)
        return int(min(r.max_claim_gib for r in self.rules) * GIB)

    def deadline(self, device_class: str, claims: list[int], period_s: float) -> Deadline:
        """The deadline of an island of ``device_class`` whose devices claim ``claims``."""
        largest = max(claims, default=0)
        rule, known = self.rule_for(device_class, largest)
        seconds = rule.seconds(largest)
        return Deadline(rule.tier, known, seconds, max(1, math.ceil(seconds / period_s)))


# Defaults. Caps: the memory of the class's largest device, in GiB (so a worker's check is
# at most that); the cpu cap is what a worker host is expected to spare. Deadlines: the cpu
# figure is measured (docs/mechanism.md: one thread builds and walks 64 MiB in 6.6 s, about
# 105 s/GiB, so 160 leaves room for a slower core); the GPU figures are estimates from
# memory bandwidth (the build is ~25 elementwise passes per entry and 1024 row launches),
# with the same margin. An operator measures its own classes.
DEFAULT_DEADLINES: Final = DeadlineTable(
    rules=(
        ClassDeadline(
            prefix="cpu:", tier="cpu", overhead_s=10.0, s_per_gib=160.0, max_claim_gib=64
        ),
        ClassDeadline(
            prefix="cuda:", tier="consumer-gpu", overhead_s=10.0, s_per_gib=4.0, max_claim_gib=32
        ),
        ClassDeadline(
            prefix="cuda:NVIDIA-A100",
            tier="datacenter-gpu",
            overhead_s=10.0,
            s_per_gib=1.0,
            max_claim_gib=80,
        ),
        ClassDeadline(
            prefix="cuda:NVIDIA-H100",
            tier="datacenter-gpu",
            overhead_s=10.0,
            s_per_gib=1.0,
            max_claim_gib=94,
        ),
        ClassDeadline(
            prefix="cuda:NVIDIA-H200",
            tier="datacenter-gpu",
            overhead_s=10.0,
            s_per_gib=1.0,
            max_claim_gib=141,
        ),
        ClassDeadline(
            prefix="cuda:NVIDIA-GH200",
            tier="datacenter-gpu",
            overhead_s=10.0,
            s_per_gib=1.0,
            max_claim_gib=144,
        ),
        ClassDeadline(
            prefix="cuda:NVIDIA-B200",
            tier="datacenter-gpu",
            overhead_s=10.0,
            s_per_gib=1.0,
            max_claim_gib=192,
        ),
    )
)


class _RuleDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str = Field(min_length=1, max_length=128)
    tier: str = Field(min_length=1, max_length=64)
    overhead_s: float = Field(gt=0, lt=1e6)
    s_per_gib: float = Field(ge=0, lt=1e6)
    max_claim_gib: float = Field(default=DEFAULT_CAP_GIB, gt=0, le=1024)


class _TableDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[_RuleDoc] = Field(min_length=1, max_length=256)


def load_deadlines(path: Path) -> DeadlineTable:
    """A table from a JSON file ``{"rules": [{"prefix", "tier", "overhead_s", "s_per_gib",
    "max_claim_gib"}]}``;
    :class:`ValueError` with the reason when it cannot be read or is not one."""
    try:
        doc = _TableDoc.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"admission deadlines ({path}): {exc}") from None
    return DeadlineTable(rules=tuple(ClassDeadline(**r.model_dump()) for r in doc.rules))
