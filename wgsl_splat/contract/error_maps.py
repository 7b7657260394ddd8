"""The per-pixel weights the fast mode observes a view with (:meth:`TrainStep.observe`), declared
once for both paths: :class:`ErrorMaps` is the NumPy definition, and the GPU path computes the same
maps on the device (``gpu/shaders/error_maps.wgsl``) from the render and the resident image, so
that an observation reads nothing back.

FastGS's multi-view error: per pixel ``e = mean_c |render − target|`` (0 where the target is
masked), min-max normalised over the view; the channels are ``(e − lo) > threshold·(hi − lo)``
(a high-error pixel), ``e`` and 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .losses import pixel_errors


@dataclass(frozen=True)
class ErrorMaps:
    """The weight map of a view observation: channels high error, error, one."""

    threshold: float

    def __call__(self, image: np.ndarray, target: np.ndarray) -> np.ndarray:
        e = pixel_errors(np.asarray(image, np.float32), np.asarray(target, np.float32))
        lo, hi = float(e.min()), float(e.max())
        high = (e - lo) > self.threshold * (hi - lo) if hi > lo else np.zeros(e.shape, bool)
        return np.stack([high.astype(np.float32), e, np.ones_like(e)], axis=2)
