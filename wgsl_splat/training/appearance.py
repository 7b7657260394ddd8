"""Per-view appearance: an affine colour transform of every training view, learned with the model
(``--appearance``; Inria's exposure compensation, docs/captures.md).

The loss compares ``C' = A·C + b`` with the photo, where ``C`` is the rendered pixel and ``[A | b]``
the view's 3×4 matrix (identity at the start). Its gradients: ``dL/dC = Aᵀ·dL/dC'``,
``dL/dA = Σ_pixels dL/dC'·Cᵀ``, ``dL/db = Σ_pixels dL/dC'``. Each view's matrix is updated by
Adam (PyTorch's, ε = 1e-8 as Inria's exposure optimiser) right after its view's backward pass,
with its own step count (a view's matrix only moves when the view is trained on). The NumPy step
does it here; the device step in ``gpu/shaders/appearance.wgsl`` (``gpu/appearance.py``).

The matrices are training-only: the PLY is the standard layout, and held-out views are rendered
and scored without any transform (the honest protocol: nothing is fitted on a test view).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

APPEARANCE_EPS = 1e-8
BETA1, BETA2 = 0.9, 0.999   # PyTorch Adam's defaults, as Inria's exposure optimiser
FLOATS = 12          # one 3×4 matrix per view


def identity(views: int) -> np.ndarray:
    """(views, 3, 4) float32 identity transforms."""
    a = np.zeros((views, 3, 4), np.float32)
    a[:, :, :3] = np.eye(3, dtype=np.float32)
    return a


@dataclass
class AppearanceState:
    """Every view's matrix and its Adam moments, (V, 3, 4) float32 each, and its step count."""

    params: np.ndarray
    m: np.ndarray
    v: np.ndarray
    steps: np.ndarray     # (V,) int64

    @staticmethod
    def fresh(views: int) -> AppearanceState:
        z = np.zeros((views, 3, 4), np.float32)
        return AppearanceState(identity(views), z, z.copy(), np.zeros(views, np.int64))

    def to_arrays(self) -> dict:
        return {"params": self.params, "m": self.m, "v": self.v, "steps": self.steps}

    @staticmethod
    def from_arrays(d: dict) -> AppearanceState:
        return AppearanceState(*(np.ascontiguousarray(d[k], np.float32) for k in ("params", "m", "v")),
                               np.asarray(d["steps"], np.int64))



def adam_scalars(steps: np.ndarray, view: int, lr: float, beta1: float = BETA1,
                 beta2: float = BETA2) -> tuple[float, float]:
    """Count one more step of ``view`` in ``steps``; ``(lr / (1 − β1^t), 1 / sqrt(1 − β2^t))``."""
    steps[view] += 1
    t = int(steps[view])
    return lr / (1.0 - beta1 ** t), 1.0 / math.sqrt(1.0 - beta2 ** t)


def apply(image: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``A·C + b`` of every pixel of ``image`` (H, W, 3), in its dtype."""
    a = a.astype(image.dtype)
    return image @ a[:, :3].T + a[:, 3]


def backward(image: np.ndarray, a: np.ndarray, d_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(dL/dimage, dL/d[A | b])`` from ``dL/d(A·C + b)``."""
    a = a.astype(d_out.dtype)
    d_image = d_out @ a[:, :3]
    flat_g = d_out.reshape(-1, 3).astype(np.float64)
    flat_c = image.reshape(-1, 3).astype(np.float64)
    d_a = np.concatenate([flat_g.T @ flat_c, flat_g.sum(axis=0)[:, None]], axis=1)
    return d_image, d_a


def adam_update(state: AppearanceState, view: int, grad: np.ndarray, lr: float, beta1: float,
                beta2: float) -> None:
    """PyTorch's Adam on view ``view``'s matrix (float32, the device's operation order)."""
    step_size, inv_bc2_sqrt = adam_scalars(state.steps, view, lr, beta1, beta2)
    g = grad.astype(np.float32)
    m, v, p = state.m[view], state.v[view], state.params[view]
    m += np.float32(1.0 - beta1) * (g - m)
    v *= np.float32(beta2)
    v += np.float32(1.0 - beta2) * (g * g)
    p -= np.float32(step_size) * m / (np.sqrt(v) * np.float32(inv_bc2_sqrt)
                                      + np.float32(APPEARANCE_EPS))
