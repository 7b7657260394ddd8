"""--appearance on the device (docs/captures.md; math in contract/appearance.py): the view's colour
transform between the rasteriser and the loss, its backward pass and its Adam update, three
dispatches of ``shaders/appearance.wgsl`` recorded into the step's pass.

Pool buffers: ``app_state`` (36 floats per view: the 3×4 matrix, Adam's m and v), ``image_app``
(the transformed image the loss reads), ``grad_app`` (the loss's gradient with respect to it),
``app_partials`` (12 floats per 16×16 tile of the image, or per image row with ``tiles`` off: the
CPU layout, ``Layout.per_view_tiles``) and the ``app_params`` uniform, written before each view's
submit (the host keeps the per-view step counts for Adam's bias corrections).
"""

from __future__ import annotations

import numpy as np

from ..contract.appearance import FLOATS, AppearanceState
from ..contract.per_view import BETA1, BETA2, EPS, adam_scalars
from .device import Gpu
from .kernels import APPEARANCE
from .pool import UNIFORM_USAGE, buffer_usage


class GpuAppearance:
    def __init__(self, gpu: Gpu, views: int, lr: float, tiles: bool = True,
                 centring: float = 0.0) -> None:
        self.ctx, self.pool, self.views, self.lr = gpu.ctx, gpu.pool, int(views), float(lr)
        self.centring = float(centring)   # optim.appearance_centring (contract/appearance.py)
        self.module = APPEARANCE.variant().module(gpu.lib)
        self.tiles = bool(tiles)   # a thread per pixel (GPUs), else per image row (CPU adapters)
        entries = (("app_apply", "app_backward", "app_update") if self.tiles else
                   ("app_apply_rows", "app_backward_rows", "app_update_serial"))
        self.group = self.module.workgroup_size(entries[0])[:2]   # pixels or rows per workgroup
        self._apply, self._backward, self._update = (self.module.pipeline(e) for e in entries)
        self._dtype = self.module.struct_dtype("AppParams")
        self.pool.get("app_params", 256, buffer_usage(*UNIFORM_USAGE))
        self.pool.get("app_state", 4 * 3 * FLOATS * self.views)
        self.steps = np.zeros(self.views, np.int64)
        self.width = self.height = 0

    def upload(self, state: AppearanceState) -> None:
        self.pool.write("app_state", state.to_flat())
        self.steps = state.steps.copy()

    def download(self) -> AppearanceState:
        flat = self.pool.read_array("app_state", np.float32, 3 * FLOATS * self.views)
        return AppearanceState.from_flat(flat, self.steps)

    def prepare(self, view: int, width: int, height: int) -> None:
        """Size the buffers and write the uniform of ``view``'s step (before its submit)."""
        self.width, self.height = int(width), int(height)
        px = self.width * self.height
        for name in ("image_app", "grad_app"):
            self.pool.get(name, 12 * px)
        self.pool.get("app_partials", 4 * FLOATS * self._partials)
        step_size, inv_bc2 = adam_scalars(self.steps, view, self.lr)
        u = np.zeros(1, self._dtype)
        u["dims"] = (self.width, self.height, view, self._partials)
        u["adam"] = (step_size, inv_bc2, BETA1, BETA2)
        u["misc"] = (EPS, self.centring, float(self.views), 0.0)
        self.pool.write("app_params", u)

    @property
    def _grid(self) -> tuple[int, int]:
        if not self.tiles:
            return -(-self.height // self.group[0]), 1
        return -(-self.width // self.group[0]), -(-self.height // self.group[1])

    @property
    def _partials(self) -> int:   # the backward pass's partial sums: one per tile, or per row
        return self._grid[0] * self._grid[1] if self.tiles else self.height

    def _bind(self, cpass):
        bg = self.pool.bind_group(self.module, 0, {
            "ap": "app_params", "image": "image", "image_app": "image_app",
            "grad_app": "grad_app", "grad_image": "grad_image", "app_state": "app_state",
            "app_partials": "app_partials"})
        cpass.set_bind_group(0, bg)

    def encode_apply(self, cpass) -> None:
        self._bind(cpass)
        cpass.set_pipeline(self._apply)
        cpass.dispatch_workgroups(*self._grid)

    def encode_backward(self, cpass) -> None:
        """Aᵀ·dL/dC' into ``grad_image`` and the Adam update of the view's matrix."""
        self._bind(cpass)
        cpass.set_pipeline(self._backward)
        cpass.dispatch_workgroups(*self._grid)
        cpass.set_pipeline(self._update)   # one workgroup: the partials' sum, then Adam
        cpass.dispatch_workgroups(1)
