"""Loss stage of the GPU step (docs/design.md §3, stage 5): ``(1-λ)·L1 + λ·(1-SSIM)`` and dL/dimage.

:class:`GpuLoss` records two dispatches (``shaders/loss.wgsl``) into the caller's open compute
pass; nothing is read back inside the step. The rendered image is read straight from the
renderer's ``image`` buffer (``H*W*3`` float32, row-major, RGB interleaved); the target has the same
layout and is uploaded once per view (:meth:`GpuLoss.upload_target`); the gradient is written to a
buffer of the same layout (default ``grad_image``) for the rasterisation backward pass. The scalar
results go to a small device buffer of ``history`` slots, each ``vec4<f32>`` =
``(loss, L1, SSIM, 1-SSIM)``: a training loop can write one slot per step and read many steps at
once (:meth:`read_history`), so logging the loss never forces a per-step sync.

Typical use inside a training step::

    enc = device.create_command_encoder()
    cpass = enc.begin_compute_pass()
    renderer.encode_forward(cpass)
    loss.encode(cpass, target="target:view7", slot=step % loss.history)
    ...                                    # backward reads pool["grad_image"]
    cpass.end()
    queue.submit([enc.finish()])
    ...
    loss.read_loss(slot)                   # only when wanted: one 16-byte read-back

Pool buffers owned here: ``loss_params`` (uniform, one 256-byte slot per result slot, selected with
a dynamic offset, rewritten only when the image size or λ change), the intermediates
(tiled: ``loss_dmaps``, ``9*H*W`` floats: ∂s/∂μ1, ∂s/∂e11, ∂s/∂e12 per channel, planar; lines:
``loss_vstats``, the vertical window sums of the statistics, then in its place the horizontal sums
of the d-maps, per pixel and channel; the window sums of xy live in the gradient buffer until the
gradient is written), ``loss_partials`` (tiled: one ``vec2`` per
16x16 tile; lines: one float per column and row of each channel), ``loss_result`` (``history`` x 16
bytes) and the gradient buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.losses import DEFAULT_LAMBDA, SSIM_C1, SSIM_C2
from . import kernels
from .device import Gpu
from .layout import LOSS_VARIANTS, Layout
from .pool import UNIFORM_USAGE, buffer_usage
from .runtime import GpuContext
from .shaders import file_constants

TILE = 16
SLOT = 256                  # bytes per dynamic uniform slot
RESULT_BYTES = 16           # one vec4<f32> per slot
MAX_GROUPS = 65535


@dataclass(frozen=True)
class LossValues:
    loss: float
    l1: float
    ssim: float

    def as_dict(self) -> dict[str, float]:
        return {"loss": self.loss, "l1": self.l1, "ssim": self.ssim}


VARIANTS = LOSS_VARIANTS
LINES_WG = file_constants(kernels.LOSS_LINES.name)["WG"]   # threads per workgroup (the WGSL's)


class GpuLoss:
    """Photometric loss and its image gradient on the device.

    ``variant="tiled"`` (GPUs; 2 dispatches): ``shaders/loss.wgsl``, 16x16 tiles with a 5-pixel
    apron in workgroup memory. ``variant="lines"`` (CPU adapters; 3 dispatches):
    ``shaders/loss_lines.wgsl``, one thread per image column / row sliding the window in registers.
    Default: the adapter's :class:`~.layout.Layout`. Both compute the same thing and are tested
    against the reference.
    """

    def __init__(self, gpu: Gpu | GpuContext, *, lam: float = DEFAULT_LAMBDA, history: int = 64,
                 prefix: str = "loss", variant: str | None = None) -> None:
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"lambda must be in [0, 1], got {lam}")
        if history < 1:
            raise ValueError("history must be >= 1")
        gpu = Gpu.of(gpu)
        ctx, pool = gpu.ctx, gpu.pool
        variant = variant or Layout.of(ctx).loss_variant
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant = variant
        self.ctx = ctx
        self.pool = pool
        self.lib = gpu.lib
        self.lam = float(lam)
        self.history = int(history)
        self.prefix = prefix
        self.width = self.height = 0
        self.tiles_x = self.tiles_y = 0
        self.module = kernels.loss(variant).module(self.lib)
        if variant == "tiled":
            self._pipelines = [self.module.pipeline(e) for e in ("ssim_forward", "ssim_backward")]
        else:
            self._pipelines = [self.module.pipeline(e) for e in (
                "lines_v_stats", "lines_h_ssim", "lines_v_grad")]
        self.n_params = f"{prefix}_params"
        self.n_vstats = f"{prefix}_vstats"
        self.n_dmaps = f"{prefix}_dmaps"
        self.n_partials = f"{prefix}_partials"
        self.n_result = f"{prefix}_result"
        self.n_readback = f"{prefix}_readback"
        self._slot = self.module.struct_dtype("LossParams", stride=SLOT)
        self._params_bytes = self.module.struct_dtype("LossParams").itemsize
        pool.get(self.n_params, SLOT * self.history, buffer_usage(*UNIFORM_USAGE))
        pool.get(self.n_result, RESULT_BYTES * self.history)
        pool.get(self.n_readback, RESULT_BYTES * self.history, buffer_usage("MAP_READ", "COPY_DST"))
        self._params_key = None

    @property
    def dispatches(self) -> int:
        """Dispatches recorded by :meth:`encode`."""
        return len(self._pipelines)

    # -- sizing -------------------------------------------------------------------------------------
    def configure(self, width: int, height: int, grad: str = "grad_image") -> None:
        """Size the buffers for ``width`` x ``height`` images (cheap when nothing changed)."""
        width, height = int(width), int(height)
        if width < 1 or height < 1:
            raise ValueError(f"image size must be positive, got {width}x{height}")
        tx, ty = -(-width // TILE), -(-height // TILE)
        if max(tx, ty, -(-3 * max(width, height) // LINES_WG)) > MAX_GROUPS:
            raise ValueError(f"image {width}x{height} too large")
        px = width * height
        self.width, self.height, self.tiles_x, self.tiles_y = width, height, tx, ty
        if self.variant == "tiled":
            self.pool.get(self.n_dmaps, 36 * px)
            self.pool.get(self.n_partials, 8 * tx * ty)
        else:
            self.pool.get(self.n_vstats, 48 * px)
            self.pool.get(self.n_partials, 4 * 3 * (width + height))
        self.pool.get(grad, 12 * px)
        key = (width, height, self.lam)
        if key != self._params_key:
            slots = np.zeros(self.history, self._slot)
            slots["dims"] = (width, height, tx, ty)
            slots["misc"][:, 0] = np.arange(self.history)
            slots["misc"][:, 1] = tx * ty
            slots["coef"] = (self.lam, 1.0 / (3.0 * px), SSIM_C1, SSIM_C2)
            self.pool.write(self.n_params, slots)
            self._params_key = key

    def upload_target(self, image: np.ndarray, name: str = "loss_target") -> str:
        """Upload an (H, W, 3) target image to pool buffer ``name`` (once per view); returns it."""
        img = np.ascontiguousarray(image, np.float32)
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(f"target must be (H, W, 3), got {img.shape}")
        self.pool.get(name, img.nbytes)
        self.pool.write(name, img)
        return name

    # -- encoding -----------------------------------------------------------------------------------
    def encode(self, cpass, *, image: str = "image", target: str = "loss_target",
               grad: str = "grad_image", slot: int = 0, width: int | None = None,
               height: int | None = None) -> None:
        """Record the loss into the caller's open compute pass.

        ``image``, ``target``, ``grad`` are pool buffer names (``H*W*3`` float32 each). The size is
        the last configured one unless ``width``/``height`` are given. The results go to
        ``slot`` (``0 <= slot < history``).
        """
        if width is not None or height is not None:
            self.configure(width or self.width, height or self.height, grad)
        if not self.width:
            raise RuntimeError("GpuLoss.configure() (or width/height) is needed before encode()")
        if not 0 <= slot < self.history:
            raise ValueError(f"slot {slot} outside [0, {self.history})")
        need = 12 * self.width * self.height
        self.pool.get(grad, need)
        for n in (image, target, grad):
            if self.pool.size(n) < need:
                raise ValueError(f"buffer {n!r} holds {self.pool.size(n)} bytes, "
                                 f"{self.width}x{self.height}x3 floats need {need}")
        if self.variant == "tiled":
            bg = self.pool.bind_group(self.module, 0, {
                "lp": (self.n_params, 0, self._params_bytes), "image": image,
                "target_img": target, "dmaps": self.n_dmaps, "partials": self.n_partials,
                "grad": grad, "result": self.n_result})
            grids = [(self.tiles_x, self.tiles_y)] * 2
        else:
            bg = self.pool.bind_group(self.module, 0, {
                "lp": (self.n_params, 0, self._params_bytes), "image": image,
                "target_img": target, "vstats": self.n_vstats,
                "partials": self.n_partials, "grad": grad,
                "result": self.n_result})
            rows = (-(-3 * self.height // LINES_WG), 1)
            cols = (-(-3 * self.width // LINES_WG), 1)
            grids = [cols, rows, cols]
        cpass.set_bind_group(0, bg, [slot * SLOT])
        for pipe, grid in zip(self._pipelines, grids):
            cpass.set_pipeline(pipe)
            cpass.dispatch_workgroups(*grid)

    # -- read-back (outside the step) ---------------------------------------------------------------
    def read_history(self, count: int | None = None, first: int = 0) -> np.ndarray:
        """Blocking read of result slots ``[first, first+count)`` as a (count, 4) array of
        (loss, L1, SSIM, 1-SSIM)."""
        count = self.history - first if count is None else int(count)
        if count <= 0 or first < 0 or first + count > self.history:
            raise ValueError(f"slots [{first}, {first + count}) outside [0, {self.history})")
        nbytes = RESULT_BYTES * count
        buf = self.pool[self.n_readback]
        with self.ctx.guard("reading the loss back"):
            enc = self.ctx.device.create_command_encoder(label="loss readback")
            enc.copy_buffer_to_buffer(self.pool[self.n_result], RESULT_BYTES * first, buf, 0,
                                      nbytes)
            self.ctx.queue.submit([enc.finish()])
            buf.map_sync("READ", 0, nbytes)
            try:
                data = bytes(buf.read_mapped(0, nbytes, copy=True))
            finally:
                buf.unmap()
        self.pool.readbacks += 1
        self.pool.readback_bytes += nbytes
        return np.frombuffer(data, np.float32).reshape(count, 4).copy()

    def read_loss(self, slot: int = 0) -> LossValues:
        """(loss, L1, SSIM) of ``slot``: one 16-byte blocking read-back."""
        r = self.read_history(1, slot)[0]
        return LossValues(float(r[0]), float(r[1]), float(r[2]))

    # -- convenience (tests, eval) ------------------------------------------------------------------
    def compute(self, img: np.ndarray, gt: np.ndarray, *, image: str = "loss_image",
                target: str = "loss_target", grad: str = "grad_image"
                ) -> tuple[float, np.ndarray, dict]:
        """Upload both images, run, read back: ``(loss, dL/dimg (H, W, 3), {"l1", "ssim"})`` like
        :func:`wgsl_splat.reference.loss.loss_and_grad`. Not for the training step."""
        img = np.ascontiguousarray(img, np.float32)
        h, w, _ = img.shape
        self.upload_target(img, image)
        self.upload_target(gt, target)
        self.configure(w, h, grad)
        with self.ctx.guard("computing the loss"):
            enc = self.ctx.device.create_command_encoder(label="loss")
            cpass = enc.begin_compute_pass(label="loss")
            self.encode(cpass, image=image, target=target, grad=grad)
            cpass.end()
            self.ctx.queue.submit([enc.finish()])
        g = self.pool.read_array(grad, np.float32, 3 * w * h).reshape(h, w, 3)
        v = self.read_loss(0)
        return v.loss, g, {"l1": v.l1, "ssim": v.ssim}
