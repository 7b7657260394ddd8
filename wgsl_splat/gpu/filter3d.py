"""The antialiased mode's 3D smoothing filter computed on the device (``shaders/filter3d.wgsl``).

The training cameras go to a storage buffer once (:meth:`Filter3D.set_cameras`); :meth:`run`
recomputes the renderer's ``filter3d`` buffer from the means in its ``params`` pages (two
dispatches per page, one submit, nothing read back). Mip-Splatting recomputes it whenever densification
changed the set and every 100 steps after densification; the trainer calls it then (and a device
densification will call the same). Math: :func:`wgsl_splat.reference.compute_filter_3d`.
"""

from __future__ import annotations

import numpy as np

from ..camera import Camera
from .kernels import FILTER3D
from .pages import page_name
from .pool import UNIFORM_USAGE, buffer_usage
from .renderer import GpuRenderer
from .sort import grid_2d


class Filter3D:
    def __init__(self, renderer: GpuRenderer) -> None:
        self.renderer = renderer
        self.ctx, self.pool = renderer.ctx, renderer.pool
        self.module = FILTER3D.variant(renderer.config).module(renderer.lib)
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
        """Recompute ``filter3d`` for the renderer's current model (one submit; both passes run
        once per page of the state, the smallest rate of all pages shared through ``nu_min``)."""
        r = self.renderer
        if not r.num:
            return
        self.pool.write("filter3d_nu_min", np.array([np.inf], np.float32).view(np.uint32))
        binds = []
        for page in r.pages:
            u = self._params.copy()
            u["sizes"] = (page.count, self.num_cameras, 0, 0)
            name = page_name("filter3d_params", page.index)
            self.pool.get(name, u.nbytes, buffer_usage(*UNIFORM_USAGE))
            self.pool.write(name, u)
            binds.append((self.pool.bind_group(self.module, 0, {
                "fp": name, "params": page_name("params", page.index),
                "cameras": "filter3d_cameras", "filter3d": r.filter_window(page),
                "nu_min": "filter3d_nu_min"}),
                grid_2d(-(-page.count // self.module.workgroup_size("filter3d_pass")[0]))))
        with self.ctx.guard("computing the 3D filter"):
            enc = self.ctx.device.create_command_encoder(label="filter3d")
            cpass = enc.begin_compute_pass(label="filter3d")
            for finish in (False, True):
                cpass.set_pipeline(self.module.pipeline("filter3d_pass", {"FINISH": int(finish)}))
                for bg, groups in binds:
                    cpass.set_bind_group(0, bg)
                    cpass.dispatch_workgroups(*groups)
            cpass.end()
            self.ctx.queue.submit([enc.finish()])
        self.runs += 1

    def read(self) -> np.ndarray:
        """(N,) float32: the device's filter (a blocking read)."""
        return self.pool.read_array("filter3d", np.float32, self.renderer.num)
