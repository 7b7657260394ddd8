"""What the format writers share: the result type, the error, quaternion and order helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class ExportError(ValueError):
    """A model this format cannot hold (or a bad request): one clear line."""


@dataclass
class Encoded:
    """One export: ``data`` is the file; row ``i`` of the file holds model row ``order[i]``
    (writers reorder for locality or progressive loading); ``notes`` say what the format dropped.
    ``members``: the files of a multi-file format (SOG's unbundled folder), ``data`` their bundle."""

    data: bytes
    order: np.ndarray
    notes: list[str] = field(default_factory=list)
    members: dict[str, bytes] | None = None


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def unit_quats(quats: np.ndarray) -> np.ndarray:
    """Normalised float64 quaternions (same component order); a zero quaternion, which no
    renderer can use, becomes the identity of a w-first layout."""
    q = np.asarray(quats, np.float64)
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    out = np.where(norm > 0, q / np.where(norm > 0, norm, 1.0), 0.0)
    out[norm[:, 0] == 0, 0] = 1.0
    return out


def smallest_three(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For unit quaternions ``q`` (N,4): the index of the largest-magnitude component and ``q``
    with its sign flipped where that component is negative (q and -q are one rotation), so the
    largest component is positive and can be rebuilt from the other three."""
    largest = np.argmax(np.abs(q), axis=1)
    sign = np.where(q[np.arange(len(q)), largest] < 0, -1.0, 1.0)
    return largest, q * sign[:, None]


def others(largest: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The three components of each row of ``q`` other than ``largest``, in index order (N,3)."""
    keep = np.ones(q.shape, bool)
    keep[np.arange(len(q)), largest] = False
    return q[keep].reshape(len(q), 3)


def _spread_bits(v: np.ndarray) -> np.ndarray:
    """Insert two zero bits between each of the low 21 bits of ``v`` (uint64)."""
    v = v & np.uint64(0x1FFFFF)
    for shift, mask in ((32, 0x1F00000000FFFF), (16, 0x1F0000FF0000FF), (8, 0x100F00F00F00F00F),
                        (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249)):
        v = (v | (v << np.uint64(shift))) & np.uint64(mask)
    return v


def morton_order(points: np.ndarray) -> np.ndarray:
    """A stable order of ``points`` (N,3) along a 3D Z-order curve (21 bits per axis over their
    bounding box): neighbours in space land near each other, which tightens the per-chunk bounds
    of compressed PLY and helps the image compression of SOG."""
    p = np.asarray(points, np.float64)
    lo, hi = p.min(axis=0), p.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    cells = np.clip(np.floor((p - lo) / span * 2097151.0), 0, 2097151).astype(np.uint64)
    code = (_spread_bits(cells[:, 0]) << np.uint64(2)) | (_spread_bits(cells[:, 1]) << np.uint64(1)) \
        | _spread_bits(cells[:, 2])
    return np.argsort(code, kind="stable")


def unorm(values: np.ndarray, bits: int) -> np.ndarray:
    """Values in [0, 1] to ``bits``-bit integers, rounded to nearest (as PlayCanvas packs them)."""
    top = (1 << bits) - 1
    return np.clip(np.floor(np.asarray(values, np.float64) * top + 0.5), 0, top).astype(np.uint32)


def byte(values: np.ndarray) -> np.ndarray:
    """Round to nearest and clamp to 0..255."""
    return np.clip(np.floor(np.asarray(values, np.float64) + 0.5), 0, 255).astype(np.uint8)


def mode_note(fmt_name: str, render_mode: str) -> list[str]:
    """The note for an antialiased model in a format that cannot record the mode."""
    if render_mode != "antialiased":
        return []
    return [f"{fmt_name} has no place for the render mode: the 3D filter is fused in (as in the "
            f"PLY), but viewers render it without the 2D Mip filter (classic)"]
