"""Step tracing for dispute bisection: hash every layer output and every op output.

Off by default and free when off: the model takes ``tracer=None`` and only calls
:meth:`Tracer.record` behind an ``is not None`` check; op-level tracing is a
``TorchDispatchMode`` that exists only inside ``with tracer.ops():``. Two parties
that disagree on a step compare their traces and find the first differing entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def tensor_digest(tensor: torch.Tensor) -> str:
    """SHA-256 over dtype, shape and the raw little-endian bytes of a tensor."""
    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    h = hashlib.sha256(f"{tensor.dtype}:{tuple(tensor.shape)}:".encode())
    h.update(t.numpy().tobytes())
    return h.hexdigest()


@dataclass
class Tracer:
    """Collects ``(name, digest)`` pairs in execution order."""

    entries: list[tuple[str, str]] = field(default_factory=list)

    def record(self, name: str, tensor: torch.Tensor) -> None:
        self.entries.append((name, tensor_digest(tensor)))

    @contextmanager
    def ops(self) -> Iterator[None]:
        """Also record the output of every aten op run inside the block (forward and backward)."""
        with _OpHashMode(self):
            yield

    def first_difference(self, other: Tracer) -> int | None:
        """Index of the first entry that differs from ``other`` (None if identical)."""
        for i, (mine, theirs) in enumerate(zip(self.entries, other.entries, strict=False)):
            if mine != theirs:
                return i
        if len(self.entries) != len(other.entries):
            return min(len(self.entries), len(other.entries))
        return None


class _OpHashMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, tracer: Tracer) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._tracer = tracer

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: Any = (),
        kwargs: Any = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        leaves, _ = tree_flatten(out)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                self._tracer.record(f"op:{func}:{i}", leaf)
        return out
