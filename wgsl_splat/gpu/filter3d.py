"""The antialiased mode's 3D smoothing filter computed on the device (``shaders/filter3d.wgsl``).

The training cameras go to a storage buffer once (:meth:`Filter3D.set_cameras`); :meth:`run`
recomputes the renderer's ``filter3d`` buffer from the means in its ``params`` buffer (two
dispatches, one submit, nothing read back). Mip-Splatting recomputes it whenever densification
changed the set and every 100 steps after densification; the trainer calls it then (and a device
densification will call the same). Math: :func:`wgsl_splat.reference.compute_filter_3d`.
"""

from __future__ import annotations

import numpy as np

from ..camera import Camera
from .pool import UNIFORM_USAGE, buffer_usage
from .renderer import GpuRenderer
from .sort import grid_2d


class Filter3D:
    def __init__(self, renderer: GpuRenderer) -> None:
        self.renderer = renderer
        self.ctx, self.pool = renderer.ctx, renderer.pool
        self.module = renderer.lib.module("filter3d", config=renderer.config)
        self._camera_dtype = self.module.struct_dtype("FilterCamera")
        self._params = np.zeros((), self.module.struct_dtype("FilterParams"))
        self.pool.get("filter3d_params", self._params.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.get("filter3d_nu_min", 16)
        self.num_cameras = 0
        self.runs = 0

    def set_cameras(self, cameras: list[Camera]) -> None:
        """Upload the cameras whose sampling rates define the filter (the training views)."""
        cams = np.zeros(max(len(cameras), 1), self._camera_dtype)
        for i, cam in enumerate(cameras):
            w2c = cam.world_to_camera[:3, :4].astype(np.float32)
            cams[i]["w2c0"], cams[i]["w2c1"], cams[i]["w2c2"] = w2c
            cams[i]["intr"] = (cam.fx, cam.fy, cam.cx, cam.cy)
            cams[i]["size"] = (cam.width, cam.height, max(cam.fx, cam.fy), 0.0)
        self.pool.get("filter3d_cameras", cams.nbytes)
        self.pool.write("filter3d_cameras", cams)
        self.num_cameras = len(cameras)

    def run(self) -> None:
        """Recompute ``filter3d`` for the renderer's current model (one submit)."""
        n = self.renderer.num
        if not n:
            return
        self._params["sizes"] = (n, self.num_cameras, 0, 0)
        self.pool.write("filter3d_params", self._params)
        self.pool.write("filter3d_nu_min", np.array([np.inf], np.float32).view(np.uint32))
        bg = self.pool.bind_group(self.module, 0, {
            "fp": "filter3d_params", "params": "params", "cameras": "filter3d_cameras",
            "filter3d": "filter3d", "nu_min": "filter3d_nu_min"})
        groups = grid_2d(-(-n // self.module.workgroup_size("filter3d_pass")[0]))
        with self.ctx.guard("computing the 3D filter"):
            enc = self.ctx.device.create_command_encoder(label="filter3d")
            cpass = enc.begin_compute_pass(label="filter3d")
            cpass.set_bind_group(0, bg)
            for finish in (False, True):
                cpass.set_pipeline(self.module.pipeline("filter3d_pass", {"FINISH": int(finish)}))
                cpass.dispatch_workgroups(*groups)
            cpass.end()
            self.ctx.queue.submit([enc.finish()])
        self.runs += 1

    def read(self) -> np.ndarray:
        """(N,) float32: the device's filter (a blocking read)."""
        return self.pool.read_array("filter3d", np.float32, self.renderer.num)
