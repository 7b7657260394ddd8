"""Mip-Splatting's 3D smoothing filter as both paths and the exports apply it: the filtered
scales and opacity factor of a Gaussian (``project.wgsl`` computes the same), and the fused model
a renderer without the filter draws alike (a PLY's fused export). The filter's size per Gaussian
is computed by :mod:`wgsl_splat.reference.filter3d` and ``shaders/filter3d.wgsl``."""

from __future__ import annotations

import numpy as np

from ..model import GaussianModel, inverse_sigmoid


def filter_3d_scales(scales: np.ndarray, filter_3d: np.ndarray | None):
    """3D smoothing filter: the scales of Σ + f²I, ``sqrt(s² + f²)`` (N,3), and the opacity factor
    ``Π s / sqrt(s² + f²) = sqrt(det Σ / det(Σ + f²I))`` (N,); no filter: ``(scales, 1)``."""
    if filter_3d is None:
        return scales, np.ones(len(scales), scales.dtype)
    f2 = np.square(np.asarray(filter_3d, scales.dtype))[:, None]
    scales3 = np.sqrt(scales * scales + f2)
    return scales3, np.prod(scales / scales3, axis=1)


def fuse_filter_3d(model: GaussianModel, filter_3d: np.ndarray) -> GaussianModel:
    """The model with the 3D filter folded into its parameters (Mip-Splatting's fused export):
    scales ``sqrt(s² + f²)`` and opacity ``σ·c3``, so that a renderer that knows no 3D filter
    draws the filtered Gaussians. Rendered in the antialiased mode with a zero filter it gives the
    image of ``model`` with ``filter_3d`` (the 2D Mip filter still applies)."""
    scales3, comp3 = filter_3d_scales(np.exp(model.log_scales.astype(np.float64)),
                                      np.asarray(filter_3d, np.float64))
    out = model.copy()
    out.log_scales[:] = np.log(scales3).astype(model.dtype)
    out.opacity_logits[:] = inverse_sigmoid(model.opacities.astype(np.float64) * comp3).astype(model.dtype)
    return out
