"""The run sketch: a fixed-size public projection of every update, for copies of old ones.

The exact copy screen (:mod:`hypertrain.aggregator.aggregate`) spans the last
:data:`~hypertrain.aggregator.aggregate.EARLIER_ROUNDS` rounds only: its cost grows with
the square of the updates it holds. Every older public update of the run
(``Tape.older``) is screened here instead, at a cost bounded per update: each update is
projected to :data:`SKETCH_DIM` numbers by a count sketch (coordinate ``i`` of tensor
``t`` adds ``sign(i) * u_i`` to bucket ``bucket(i)``), whose hashes come from a stream
seeded by the run id and the tensor name alone, so anyone recomputes it from the
update's bytes. Inner products survive the projection on average
(``E <S u, S v> = <u, v>``), and a rescaled, re-encoded or combined copy of public
updates is, in the sketch, the same combination of their sketches.

Each sketch is kept as int16 codes and one float scale, so every inner product between
sketches is an exact integer times two scales: the decisions are the same on every
machine. A candidate is a copy (:func:`sketch_copies`) when a greedy projection
(orthogonal matching pursuit, at most :data:`SKETCH_BASIS` public updates) leaves less
than :data:`~hypertrain.aggregator.robust.COPY_RESIDUAL` of its sketch's norm: one old
update replayed, or a combination of a few, is explained; an honest update keeps its own
part, which no handful of other updates explains.

What it cannot do: the projection is public, so an island that knows it can add a
small perturbation (about ``sqrt(SKETCH_DIM / parameters)`` of the update's norm) that
moves the sketch of a copy anywhere (docs/threats.md, Merge). Such an island is still
paid only while it is not audited.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.gram import Shapes
from hypertrain.aggregator.robust import COPY_RESIDUAL
from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.update import iter_decode_update

SKETCH_DIM: Final = 1024  # buckets of the count sketch (a power of two)
SKETCH_BASIS: Final = 8  # public updates the greedy projection may combine
_CHUNK: Final = 1 << 20  # coordinates hashed at a time (bounds the scratch memory)
_DOMAIN: Final = b"hypertrain/v1/update-sketch"
_FILE_BYTES: Final = 8 + 2 * SKETCH_DIM  # a kept sketch: float64 scale, int16 codes


@dataclass(frozen=True, slots=True)
class Sketch:
    """An update's count sketch: ``scale * codes`` (codes in the int16 range, one scale)."""

    codes: np.ndarray  # int64 array of SKETCH_DIM values in [-32767, 32767]
    scale: float


def _stream(run_id: str, name: str) -> np.random.Generator:
    seed = hashlib.sha256(_DOMAIN + b"\x00" + run_id.encode() + b"\x00" + name.encode())
    return np.random.Generator(np.random.PCG64(int.from_bytes(seed.digest()[:16], "big")))


def hashes(run_id: str, name: str, numel: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(buckets, signs) of tensor ``name``'s coordinates, :data:`_CHUNK` at a time: the
    raw 64-bit PCG64 stream (stable across versions), low bits the bucket, top bit the sign."""
    gen = _stream(run_id, name)
    for lo in range(0, numel, _CHUNK):
        raw = gen.bit_generator.random_raw(min(_CHUNK, numel - lo))
        buckets = (raw & np.uint64(SKETCH_DIM - 1)).astype(np.intp)
        yield buckets, np.where(raw >> np.uint64(63), -1.0, 1.0)


def update_sketch(data: bytes, run_id: str, shapes: Shapes, compression: CompressionSpec) -> Sketch:
    """The count sketch of a validated update of the run, as int16 codes and a scale."""
    acc = np.zeros(SKETCH_DIM, dtype=np.float64)
    for name, tensor in iter_decode_update(data, compression, shapes):
        values = tensor.numpy().astype(np.float64).ravel()
        for lo, (buckets, signs) in zip(
            range(0, values.size, _CHUNK), hashes(run_id, name, values.size), strict=True
        ):
            part = values[lo : lo + _CHUNK]
            acc += np.bincount(buckets, weights=signs * part, minlength=SKETCH_DIM)
    peak = float(np.max(np.abs(acc)))
    if peak == 0.0:
        return Sketch(np.zeros(SKETCH_DIM, dtype=np.int64), 0.0)
    scale = peak / 32767.0
    return Sketch(np.rint(acc / scale).astype(np.int64), scale)


@dataclass
class SketchCache:
    """Sketches by update hash: each update is projected once per aggregator process, and
    once for good with a ``directory`` (a restarted aggregator or witness otherwise
    fetched and projected every older update of the run before its first merge: minutes
    at round 200 of the long run)."""

    run_id: str
    directory: Path | None = None  # where sketches are kept across restarts
    by_sha: dict[str, Sketch] = field(default_factory=dict)

    def of(
        self, sha: str, blobs: BlobSource, shapes: Shapes, compression: CompressionSpec
    ) -> Sketch:
        """The sketch of the update ``sha``, fetched and projected on the first ask only."""
        found = self.by_sha.get(sha) or self._load(sha)
        if found is None:
            data = blobs.get(sha)
            found = update_sketch(data, self.run_id, shapes, compression)
            self._save(sha, found)
        self.by_sha[sha] = found
        return found

    def _path(self, sha: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{sha}.sketch"

    def _load(self, sha: str) -> Sketch | None:
        path = self._path(sha)
        raw = path.read_bytes() if path is not None and path.is_file() else b""
        if len(raw) != _FILE_BYTES:
            return None  # none kept, or a partial file: computed again
        scale = float(np.frombuffer(raw[:8], dtype="<f8")[0])
        return Sketch(np.frombuffer(raw[8:], dtype="<i2").astype(np.int64), scale)

    def _save(self, sha: str, sketch: Sketch) -> None:
        path = self._path(sha)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(np.float64(sketch.scale).astype("<f8").tobytes()
                        + sketch.codes.astype("<i2").tobytes())  # fmt: skip
        tmp.replace(path)


@dataclass(frozen=True, slots=True)
class SketchCopy:
    residual: float  # |residual| / |S c| after the greedy projection
    basis: tuple[int, ...]  # the public updates it was projected on (indices)


def _dots(atoms: np.ndarray, scales: np.ndarray, v: Sketch) -> np.ndarray:
    """``<S a_k, S v>`` for every atom: exact integer dots times the two scales."""
    out: np.ndarray = np.matmul(atoms, v.codes).astype(np.float64) * scales * v.scale
    return out


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _atom(atoms: np.ndarray, scales: np.ndarray, k: int) -> Sketch:
    return Sketch(atoms[k], float(scales[k]))


def explained(candidate: Sketch, atoms: np.ndarray, scales: np.ndarray) -> SketchCopy | None:
    """Greedy projection of ``candidate`` on at most :data:`SKETCH_BASIS` atoms (rows of
    ``atoms``, int codes, with ``scales``); a :class:`SketchCopy` when it is explained.

    Each step takes the atom with the largest squared correlation with what is left
    (per its squared norm; the first index on a tie), extends the Cholesky factor of the
    chosen atoms' Gram matrix and recomputes the residual's norm exactly from it."""
    cc = float(candidate.codes @ candidate.codes) * candidate.scale**2
    if cc == 0.0 or atoms.shape[0] == 0:
        return None
    norms2 = np.einsum("ij,ij->i", atoms, atoms).astype(np.float64) * scales * scales
    corr = _dots(atoms, scales, candidate)
    usable = norms2 > 0
    chosen: list[int] = []
    rows: list[list[float]] = []  # Cholesky factor of the chosen atoms' Gram matrix
    y: list[float] = []  # L^-1 <a_chosen, c>
    left = corr.copy()
    cols: list[np.ndarray] = []  # <a_j, a_k> for every j, per chosen atom k
    while len(chosen) < SKETCH_BASIS and usable.any():
        score = np.where(usable, left * left / np.where(usable, norms2, 1.0), -1.0)
        k = int(np.argmax(score))
        usable[k] = False
        col = _dots(atoms, scales, _atom(atoms, scales, k))  # <a_j, a_k> for every j
        new: list[float] = []
        for r, j in enumerate(chosen):  # forward substitution: L new = G[chosen][k]
            new.append((float(col[j]) - _dot(rows[r][:r], new)) / rows[r][r])
        d2 = float(norms2[k]) - _dot(new, new)
        if d2 <= float(norms2[k]) * 1e-12:
            continue  # inside the span already: it explains nothing new
        d = math.sqrt(d2)
        y.append((float(corr[k]) - _dot(new, y)) / d)
        rows.append([*new, d])
        chosen.append(k)
        cols.append(col)
        rel = math.sqrt(max(0.0, cc - _dot(y, y)) / cc)
        if rel < COPY_RESIDUAL:
            return SketchCopy(rel, tuple(chosen))
        left = corr - _projected(cols, rows, y)
    return None


def _projected(
    cols: Sequence[np.ndarray], rows: list[list[float]], y: Sequence[float]
) -> np.ndarray:
    """``<a_j, P c>`` for every atom, ``P`` the projection on the chosen atoms' span."""
    n = len(cols)
    coef = [0.0] * n  # solve L^T coef = y by back substitution
    for r in range(n - 1, -1, -1):
        tail = math.fsum(rows[s][r] * coef[s] for s in range(r + 1, n))
        coef[r] = (y[r] - tail) / rows[r][r]
    out = np.zeros(cols[0].shape[0], dtype=np.float64)
    for c, col in zip(coef, cols, strict=True):
        out += c * col
    return out


def sketch_copies(
    candidates: Mapping[str, Sketch], public: Sequence[tuple[str, Sketch]]
) -> dict[str, tuple[float, list[str]]]:
    """hotkey -> (residual, names of the public updates that explain it), per copy."""
    if not public:
        return {}
    atoms = np.stack([s.codes for _, s in public])
    scales = np.array([s.scale for _, s in public], dtype=np.float64)
    out: dict[str, tuple[float, list[str]]] = {}
    for hotkey in sorted(candidates):
        found = explained(candidates[hotkey], atoms, scales)
        if found is not None:
            out[hotkey] = (found.residual, [public[k][0] for k in found.basis])
    return out
