"""Per-view appearance: an affine colour transform of every training view, learned with the model
(``--appearance``; Inria's exposure compensation, docs/captures.md).

The loss compares ``C' = A·C + b`` with the photo, where ``C`` is the rendered pixel and ``[A | b]``
the view's 3×4 matrix (identity at the start). Its gradients: ``dL/dC = Aᵀ·dL/dC'``,
``dL/dA = Σ_pixels dL/dC'·Cᵀ``, ``dL/db = Σ_pixels dL/dC'``. Each view's matrix is updated by its
own Adam right after its view's backward pass (``contract/per_view.py``), its gradient plus the
centring term of :func:`centring_grad`. The NumPy step does it
here; the device step in ``gpu/shaders/appearance.wgsl`` (``gpu/appearance.py``).

The matrices are training-only: the PLY is the standard layout, and held-out views are rendered
and scored without any transform (the honest protocol: nothing is fitted on a test view).
"""

from __future__ import annotations

import numpy as np

from .per_view import PerViewState

FLOATS = 12          # one 3×4 matrix per view


def identity(views: int) -> np.ndarray:
    """(views, 3, 4) float32 identity transforms."""
    a = np.zeros((views, 3, 4), np.float32)
    a[:, :, :3] = np.eye(3, dtype=np.float32)
    return a


class AppearanceState(PerViewState):
    """Every view's matrix and its Adam moments, (V, 3, 4) float32 each, and its step count."""

    SHAPE = (3, 4)

    @classmethod
    def initial(cls, views: int) -> np.ndarray:
        return identity(views)


def centring_grad(params: np.ndarray, strength: float) -> np.ndarray:
    """The term every view's update adds to its gradient (``optim.appearance_centring``):
    ``strength · (mean over views of [A | b] − [I | 0])``, float32 (3, 4). Only the map common to
    all views has no gradient from the photos (the model's colours absorb it at no cost); this
    term moves it, and nothing else, back to the identity. The mean is over every view's matrix,
    the held-out ones (identities, never trained) included, as the device reads them."""
    mean = np.asarray(params, np.float32).mean(axis=0, dtype=np.float32)
    return np.float32(strength) * (mean - identity(1)[0])


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
