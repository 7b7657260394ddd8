"""--pose-opt on the device (docs/captures.md; math in contract/pose.py): the view's corrected pose
computed on the device before its forward pass, the view-matrix gradient's partials from
``project_backward.wgsl`` (``backward.py``'s generated ``pose_grad.wgsl``) and the correction's
Adam update after it, from ``shaders/pose.wgsl``; nothing is read back.

The corrected pose reaches the projection through the render uniform: ``pose_apply`` writes the
rows of ``[R' | t']`` and the centre into ``pose_camera`` in its own compute pass, and the encoder
copies those 64 bytes over the start of ``render_params`` (``w2c0..2``, ``cam_pos``) and of every
page's RenderParams (a paged state) before the step's pass (the host's ``queue.write_buffer`` of
the loaded pose lands first).

Pool buffers: ``pose_state`` (18 floats per view: δ, Adam's m and v), ``pose_camera`` (4 vec4),
``pose_partials`` (``backward.py``) and the ``pose_params`` uniform, written before each view's
submit (the host keeps the per-view step counts for Adam's bias corrections).
"""

from __future__ import annotations

import numpy as np

from ..contract.per_view import BETA1, BETA2, EPS, adam_scalars
from ..contract.pose import FLOATS, PoseState
from .device import Gpu
from .kernels import POSE
from .pool import UNIFORM_USAGE, buffer_usage

CAMERA_BYTES = 64   # w2c0, w2c1, w2c2, cam_pos: the first four vec4 of RenderParams


class GpuPose:
    def __init__(self, gpu: Gpu, views: int, lr: float, extent: float,
                 parallel: bool = True) -> None:
        self.ctx, self.pool, self.views = gpu.ctx, gpu.pool, int(views)
        self.lr, self.extent = float(lr), float(extent)
        self.module = POSE.variant().module(gpu.lib)
        # the partials summed by a workgroup (GPUs) or by one thread (CPU adapters: no barriers)
        self._apply, self._update = (self.module.pipeline(e) for e in (
            "pose_apply", "pose_update" if parallel else "pose_update_serial"))
        self._dtype = self.module.struct_dtype("PoseParams")
        self.pool.get("pose_params", 256, buffer_usage(*UNIFORM_USAGE))
        self.pool.get("pose_state", 4 * 3 * FLOATS * self.views)
        self.pool.get("pose_camera", CAMERA_BYTES)
        self.steps = np.zeros(self.views, np.int64)

    def upload(self, state: PoseState) -> None:
        self.pool.write("pose_state", state.to_flat())
        self.steps = state.steps.copy()

    def download(self) -> PoseState:
        flat = self.pool.read_array("pose_state", np.float32, 3 * FLOATS * self.views)
        return PoseState.from_flat(flat, self.steps)

    def prepare(self, view: int, camera, partials: int) -> None:
        """Write the uniform of ``view``'s step (before its submit): its loaded pose, Adam's
        scalars and how many partials ``project_backward`` writes."""
        step_size, inv_bc2 = adam_scalars(self.steps, view, self.lr)
        u = np.zeros(1, self._dtype)
        w2c = np.asarray(camera.world_to_camera, np.float64)
        u["w0"], u["w1"], u["w2"] = w2c[:3].astype(np.float32)
        u["adam"] = (step_size, inv_bc2, BETA1, BETA2)
        u["misc"] = (EPS, self.extent, 0.0, 0.0)
        u["dims"] = (view, partials, 0, 0)
        self.pool.write("pose_params", u)

    def _bind(self, cpass):
        cpass.set_bind_group(0, self.pool.bind_group(self.module, 0, {
            "pp": "pose_params", "pose_state": "pose_state", "pose_camera": "pose_camera",
            "pose_partials": "pose_partials"}))

    def encode_apply(self, enc, uniforms=("render_params",)) -> None:
        """Into ``enc`` before the step's pass: the corrected pose over the render uniform's and
        over each of ``uniforms`` (a paged state's per-page RenderParams, gpu/pages.py)."""
        cpass = enc.begin_compute_pass(label="pose apply")
        self._bind(cpass)
        cpass.set_pipeline(self._apply)
        cpass.dispatch_workgroups(1)
        cpass.end()
        for name in dict.fromkeys(("render_params", *uniforms)):
            enc.copy_buffer_to_buffer(self.pool["pose_camera"], 0, self.pool[name], 0,
                                      CAMERA_BYTES)

    def encode_update(self, cpass) -> None:
        """After ``project_backward``: the view's dL/dδ and the Adam update of δ."""
        self._bind(cpass)
        cpass.set_pipeline(self._update)   # one workgroup (or thread): the partials' sum, Adam
        cpass.dispatch_workgroups(1)
