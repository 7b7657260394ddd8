"""The fast mode's observation weights on the device
(:class:`~wgsl_splat.contract.error_maps.ErrorMaps`, ``shaders/error_maps.wgsl``): three dispatches
into the caller's open compute pass turn the rendered image and a view's resident image into the
weight map the rasterisation backward pass reads as dL/dimage, so that a view observation reads no
image back and uploads none. The first two alone leave the image's (lowest, highest, summed)
per-pixel error in 16 bytes on the device (:attr:`GpuErrorMaps.total`): the sum over the pixels is
the loss's L1 term (a masked pixel counting zero) times the pixels, what the growth validation
reads.
"""

from __future__ import annotations

import numpy as np

from .device import Gpu
from .kernels import ERROR_MAPS
from .pool import UNIFORM_USAGE, buffer_usage
from .shaders import file_constants

_CONSTS = file_constants(ERROR_MAPS.name)
PIXELS_PER_GROUP = _CONSTS["WG"] * _CONSTS["PER_THREAD"]
MAX_GROUPS = 65535


class GpuErrorMaps:
    def __init__(self, gpu: Gpu) -> None:
        self.pool = gpu.pool
        self.module = ERROR_MAPS.variant().module(gpu.lib)
        self._pipelines = [self.module.pipeline(e)
                           for e in ("error_range", "image_range", "error_weights")]
        self._dtype = self.module.struct_dtype("ErrorMapParams")
        self.pool.get("error_map_params", 256, buffer_usage(*UNIFORM_USAGE))

    def encode(self, cpass, *, image: str, target: str, out: str, width: int, height: int,
               threshold: float = 0.0, weights: bool = True) -> None:
        """Record the weight map of ``image`` against ``target`` into ``out`` (pool buffers of
        ``height × width × 3`` floats; ``out`` is sized here); ``weights=False``: only the error
        (``out``'s middle channel) and its :attr:`total`. The uniform is written now: one map
        per submit."""
        pixels = int(width) * int(height)
        groups = -(-pixels // PIXELS_PER_GROUP)
        if not 0 < groups <= MAX_GROUPS:
            raise ValueError(f"an error map of {width}x{height} pixels is beyond one dispatch")
        self.pool.get(out, 12 * pixels)
        self.pool.get("error_ranges", 16 * (groups + 1))
        u = np.zeros(1, self._dtype)
        u["pixels"], u["groups"], u["threshold"] = pixels, groups, threshold
        self.pool.write("error_map_params", u)
        cpass.set_bind_group(0, self.pool.bind_group(self.module, 0, {
            "ep": "error_map_params", "image": image, "target_img": target, "wmap": out,
            "ranges": "error_ranges"}))
        grids = (groups, 1, groups) if weights else (groups, 1)
        for pipe, grid in zip(self._pipelines, grids):
            cpass.set_pipeline(pipe)
            cpass.dispatch_workgroups(grid, 1, 1)
        self.total = ("error_ranges", 16 * groups)

    #: after :meth:`encode`: (pool buffer, byte offset) of the image's (lo, hi, sum, 0) float32
    total: tuple[str, int] = ("error_ranges", 0)
