"""Per-training-view parameters learned with the model (``--appearance``'s colour transforms,
``--pose-opt``'s pose corrections): their state, its Adam and its device layout, declared once.

Each view's parameters have their own Adam (PyTorch's, as Inria's exposure optimiser and gsplat's
pose optimiser) with their own step count, updated right after the view's backward pass: a view's
parameters only move when the view is trained on. On the device the state is one float32 array of
``[params | m | v]`` per view (``gpu/appearance.py``, ``gpu/pose.py``); the bias corrections are
computed here for both paths (:func:`adam_scalars`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

BETA1, BETA2 = 0.9, 0.999   # PyTorch Adam's defaults
EPS = 1e-8


@dataclass
class PerViewState:
    """Every view's parameters and their Adam moments, ``(V, *SHAPE)`` float32 each, and each
    view's step count. A subclass names its ``SHAPE`` and its :meth:`initial` values."""

    SHAPE: ClassVar[tuple[int, ...]] = ()

    params: np.ndarray
    m: np.ndarray
    v: np.ndarray
    steps: np.ndarray     # (V,) int64

    @classmethod
    def initial(cls, views: int) -> np.ndarray:
        """The parameters a run starts from (zero unless a subclass says otherwise)."""
        return np.zeros((views, *cls.SHAPE), np.float32)

    @classmethod
    def fresh(cls, views: int):
        z = np.zeros((views, *cls.SHAPE), np.float32)
        return cls(cls.initial(views), z, z.copy(), np.zeros(views, np.int64))

    def to_arrays(self) -> dict:
        return {"params": self.params, "m": self.m, "v": self.v, "steps": self.steps}

    @classmethod
    def from_arrays(cls, d: dict):
        return cls(*(np.ascontiguousarray(d[k], np.float32) for k in ("params", "m", "v")),
                   np.asarray(d["steps"], np.int64))

    def to_flat(self) -> np.ndarray:
        """(V, 3·F) float32: each view's ``[params | m | v]``, the device's layout."""
        views = len(self.steps)
        return np.ascontiguousarray(np.concatenate(
            [a.reshape(views, -1) for a in (self.params, self.m, self.v)], axis=1), np.float32)

    @classmethod
    def from_flat(cls, flat: np.ndarray, steps: np.ndarray):
        views = len(steps)
        parts = np.asarray(flat, np.float32).reshape(views, 3, -1)
        return cls(*(parts[:, k].reshape(views, *cls.SHAPE).copy() for k in range(3)),
                   np.asarray(steps, np.int64).copy())


def adam_scalars(steps: np.ndarray, view: int, lr: float) -> tuple[float, float]:
    """Count one more step of ``view`` in ``steps``; ``(lr / (1 − β1^t), 1 / sqrt(1 − β2^t))``."""
    steps[view] += 1
    t = int(steps[view])
    return lr / (1.0 - BETA1 ** t), 1.0 / math.sqrt(1.0 - BETA2 ** t)


def adam_update(state: PerViewState, view: int, grad: np.ndarray, lr: float,
                scale: np.ndarray | None = None) -> None:
    """PyTorch's Adam on view ``view``'s parameters (float32, the device's operation order);
    ``scale``: a per-element factor of the rate (None: 1)."""
    step_size, inv_bc2_sqrt = adam_scalars(state.steps, view, lr)
    rate = np.float32(step_size)
    if scale is not None:
        rate = np.asarray(scale, np.float32) * rate
    g = np.asarray(grad, np.float32)
    m, v, p = state.m[view], state.v[view], state.params[view]
    m += np.float32(1.0 - BETA1) * (g - m)
    v *= np.float32(BETA2)
    v += np.float32(1.0 - BETA2) * (g * g)
    p -= rate * m / (np.sqrt(v) * np.float32(inv_bc2_sqrt) + np.float32(EPS))
