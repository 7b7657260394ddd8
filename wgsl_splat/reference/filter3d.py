"""Mip-Splatting's 3D smoothing filter: the size of each Gaussian's filter from the training cameras.

``filter_3d = sqrt(filter_3d_variance) / ν_max`` where ν_max is the highest sampling rate
``max(fx, fy) / z`` (pixels per world unit at the mean's depth z) among the training cameras that
see the mean: in front (z > ``filter_3d_near``) and inside the image widened by
``filter_3d_margin`` on every side. A Gaussian no camera sees gets the largest filter of the
others (the lowest ν_max); with no Gaussian seen at all, every filter is 0. This is the NumPy
oracle of ``shaders/filter3d.wgsl`` (and the CPU path's implementation); Mip-Splatting's
``compute_3D_filter`` takes the minimum depth and the largest focal length separately, which is the
same for cameras of one focal length and otherwise the less strict of the two bounds.
"""

from __future__ import annotations

import numpy as np

from ..camera import Camera
from ..render_config import ANTIALIASED, RenderConfig


def sampling_rates(means: np.ndarray, cameras: list[Camera], config: RenderConfig = ANTIALIASED
                   ) -> np.ndarray:
    """(N,) ν_max of every mean (0 where no camera sees it), in float64."""
    means = np.asarray(means, np.float64)
    nu = np.zeros(len(means))
    margin = config.filter_3d_margin
    for cam in cameras:
        t = means @ cam.rotation.T + cam.translation
        z = t[:, 2]
        zs = np.maximum(z, config.filter_3d_near)   # keeps the division finite; z ≤ near is out
        x = t[:, 0] / zs * cam.fx + cam.cx
        y = t[:, 1] / zs * cam.fy + cam.cy
        seen = ((z > config.filter_3d_near)
                & (x >= -margin * cam.width) & (x <= (1.0 + margin) * cam.width)
                & (y >= -margin * cam.height) & (y <= (1.0 + margin) * cam.height))
        nu = np.where(seen, np.maximum(nu, max(cam.fx, cam.fy) / zs), nu)
    return nu


def compute_filter_3d(means: np.ndarray, cameras: list[Camera],
                      config: RenderConfig = ANTIALIASED) -> np.ndarray:
    """(N,) float64 3D filter size (world units) of every Gaussian (see the module docstring)."""
    nu = sampling_rates(means, cameras, config)
    seen = nu > 0
    if not seen.any():
        return np.zeros(len(nu))
    nu = np.where(seen, nu, nu[seen].min())
    return np.sqrt(config.filter_3d_variance) / nu
