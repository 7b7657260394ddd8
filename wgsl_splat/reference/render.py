"""Forward render and full backward pass of the NumPy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..camera import Camera
from ..model import GaussianModel
from ..render_config import CLASSIC, RenderConfig
from .projection import Projection, project, project_backward
from .raster import RasterResult, RasterStructure, ScreenGrads, rasterize, rasterize_backward


@dataclass
class RenderOutput:
    image: np.ndarray
    proj: Projection
    raster: RasterResult

    @property
    def final_T(self) -> np.ndarray:
        return self.raster.final_T

    @property
    def last_contrib(self) -> np.ndarray:
        return self.raster.last_contrib


@dataclass
class Gradients:
    params: GaussianModel   # dL/d(stored parameters), same shapes as the model
    screen: ScreenGrads     # dL/d(projected quantities); means2d feeds densification statistics
    visible: np.ndarray     # (N,) bool


def render(model: GaussianModel, camera: Camera, background=(0.0, 0.0, 0.0), *,
           active_sh_degree: int | None = None, structure: RasterStructure | None = None,
           config: RenderConfig = CLASSIC, filter_3d: np.ndarray | None = None) -> RenderOutput:
    """Render ``camera``; ``config`` picks the mode, ``filter_3d`` (N,) is the antialiased mode's
    3D filter (see :func:`~wgsl_splat.reference.filter3d.compute_filter_3d`)."""
    proj = project(model, camera, active_sh_degree, config, filter_3d)
    raster = rasterize(proj, background, structure)
    return RenderOutput(raster.image, proj, raster)


def render_backward(model: GaussianModel, camera: Camera, out: RenderOutput,
                    dL_dimage: np.ndarray) -> Gradients:
    dL_dimage = np.asarray(dL_dimage, dtype=out.image.dtype)
    if dL_dimage.shape != out.image.shape:
        raise ValueError(f"dL/dimage has shape {dL_dimage.shape}, image is {out.image.shape}")
    screen = rasterize_backward(out.proj, out.raster, dL_dimage)
    params = project_backward(model, camera, out.proj, screen.means2d, screen.conics, screen.colors,
                              screen.opacities)
    return Gradients(params, screen, out.proj.visible.copy())
