"""Forward render and full backward pass of the NumPy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..camera import Camera
from ..model import GaussianModel
from ..render_config import CLASSIC, RenderConfig
from .projection import Projection, project, project_backward
from .raster import (
    RasterResult,
    RasterStructure,
    ScreenGrads,
    rasterize,
    rasterize_backward,
    rasterize_image,
)


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


def render_image(model: GaussianModel, camera: Camera, background=(0.0, 0.0, 0.0), *,
                 active_sh_degree: int | None = None, config: RenderConfig = CLASSIC,
                 filter_3d: np.ndarray | None = None, chunk: int = 65536,
                 depth_chunk: int = 1024) -> np.ndarray:
    """The image :func:`render` gives, in memory bounded by ``chunk`` Gaussians projected at a
    time and :func:`~.raster.rasterize_image`'s bounds, for models of millions of Gaussians (the
    full forward pass keeps every intermediate for the backward pass: 15 GB for 2M). Only the
    visible Gaussians' screen-space quantities are kept, in the order of the model, so depth ties
    break as in :func:`render`."""
    parts = []
    for s in range(0, max(len(model), 1), chunk):
        part = slice(s, s + chunk)
        p = project(model.subset(part), camera, active_sh_degree, config,
                    None if filter_3d is None else np.asarray(filter_3d)[part])
        vis = p.visible
        parts.append((p.means2d[vis], p.conics[vis], p.depths[vis], p.radii[vis], p.colors[vis],
                      p.opacities[vis], p.tile_rect[vis]))
    proj = Projection(*(np.concatenate(a) for a in zip(*parts)), camera.width, camera.height,
                      config=config)
    return rasterize_image(proj, background, depth_chunk)


def render_backward(model: GaussianModel, camera: Camera, out: RenderOutput,
                    dL_dimage: np.ndarray, view_grad: np.ndarray | None = None) -> Gradients:
    """``view_grad`` (3, 4): the camera's ``[dL/dR | dL/dt]`` is added into it (``--pose-opt``)."""
    dL_dimage = np.asarray(dL_dimage, dtype=out.image.dtype)
    if dL_dimage.shape != out.image.shape:
        raise ValueError(f"dL/dimage has shape {dL_dimage.shape}, image is {out.image.shape}")
    screen = rasterize_backward(out.proj, out.raster, dL_dimage)
    params = project_backward(model, camera, out.proj, screen.means2d, screen.conics, screen.colors,
                              screen.opacities, view_grad)
    return Gradients(params, screen, out.proj.visible.copy())
