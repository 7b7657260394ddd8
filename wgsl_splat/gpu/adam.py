"""Adam on the device (docs/design.md §3, stage 9): one dispatch updates every parameter group in place.

The update is :func:`wgsl_splat.contract.optim.adam_step` (the same operation order, float32), with the
per-group learning rates of :class:`wgsl_splat.contract.optim.OptimConfig` and the SH array split into a DC
and a rest group. It runs on four device buffers of the same flat float32 layout: parameters,
gradients, first and second moments. The layout is not hard-wired: :class:`ParamLayout` lists
segments ``[start, start+count)`` with their learning-rate group(s), so the kernel follows
whatever the renderer and the backward pass store. :meth:`ParamLayout.flat` is the renderer's
current layout (one buffer ``params``: means 3N | log_scales 3N | quats 4N | opacity N | sh N·K·3),
and the backward pass is expected to write its gradients in the same layout (``grads``).

Per step the host writes one small uniform (step sizes ``lr/(1-β1^t)`` per group and
``sqrt(1-β2^t)``) with ``queue.write_buffer`` before the submit; :meth:`GpuAdam.encode` records the
dispatch into the caller's open compute pass. With ``zero_grads=True`` (the default) the kernel
clears each gradient after reading it, so the next step's backward pass can accumulate into a zero
buffer without a separate clear. Only one Adam step per submit (the uniform holds one step).

The training step's state is paged (:mod:`.pages`): :meth:`GpuAdam.bind_pages` runs the
kernel once per page, each page its own flat layout. A single-view step does not run this kernel
at all: the projection backward pass applies the same update as it computes each gradient
(``shaders/adam_sink.wgsl``, uniform from :meth:`GpuAdam.encode_fused`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.optim import LR_GROUPS, AdamState, OptimConfig
from ..model import GaussianModel, param_offsets
from .device import Gpu
from .kernels import ADAM
from .pages import PagedArrays, page_name
from .pool import UNIFORM_USAGE, buffer_usage
from .runtime import GpuContext
from .shaders import file_constants

# read from adam.wgsl, so the host and the kernel cannot disagree
WG = file_constants(ADAM.name)["WG"]                       # threads per workgroup
MAX_SEGMENTS = file_constants(ADAM.name)["MAX_SEGMENTS"]   # length of AdamParams.seg
PER_THREAD = 4                                   # floats per thread: one vec4<f32>
MAX_GROUPS_X = 65535
BLOCK = WG * PER_THREAD                          # floats per workgroup (one vec4 per thread)
MIXED = 0xFFFFFFFF


@dataclass(frozen=True)
class Segment:
    """Floats ``[start, start+count)`` of the flat buffers, updated at the rate of ``group``;
    with ``rest_group`` set, element ``j`` uses ``group`` when ``(j - start) % period < split``
    and ``rest_group`` otherwise."""

    start: int
    count: int
    group: str
    rest_group: str | None = None
    period: int = 1
    split: int = 1

    def __post_init__(self) -> None:
        for g in (self.group, self.rest_group):
            if g is not None and g not in LR_GROUPS:
                raise ValueError(f"unknown learning-rate group {g!r}; expected one of {LR_GROUPS}")
        if self.start < 0 or self.count < 0 or self.period < 1 or not 0 <= self.split <= self.period:
            raise ValueError(f"bad segment {self}")


@dataclass(frozen=True)
class ParamLayout:
    """Segments of the flat parameter/gradient/moment buffers (at most 8, may leave gaps)."""

    segments: tuple[Segment, ...]

    def __post_init__(self) -> None:
        if len(self.segments) > MAX_SEGMENTS:
            raise ValueError(f"at most {MAX_SEGMENTS} segments, got {len(self.segments)}")
        if self.total >= 2 ** 31:
            raise ValueError("more than 2^31 parameters")

    @property
    def total(self) -> int:
        return max((s.start + s.count for s in self.segments), default=0)

    @staticmethod
    def flat(n: int, k: int) -> "ParamLayout":
        """The renderer's ``params`` buffer: means | log_scales | quats | opacity logits | sh."""
        n = int(n)
        return ParamLayout((
            Segment(0, 3 * n, "means"),
            Segment(3 * n, 3 * n, "log_scales"),
            Segment(6 * n, 4 * n, "quats"),
            Segment(10 * n, n, "opacity_logits"),
            Segment(11 * n, 3 * k * n, "sh_dc", "sh_rest", period=3 * k, split=3),
        ))

    @staticmethod
    def from_renderer(renderer) -> "ParamLayout":
        n, k = renderer.num, renderer.sh_coeffs
        if renderer.offsets != param_offsets(n):
            raise ValueError(f"unexpected renderer parameter offsets {renderer.offsets}")
        return ParamLayout.flat(n, k)

    # -- host-side packing in this layout (tests, checkpoints, densification) -----------------------
    @staticmethod
    def pack(model: GaussianModel) -> np.ndarray:
        """Flat float32 array of ``model`` in the :meth:`flat` layout."""
        return np.concatenate([np.asarray(a, np.float32).ravel() for a in
                               (model.means, model.log_scales, model.quats, model.opacity_logits,
                                model.sh)])

    @staticmethod
    def unpack(flat: np.ndarray, n: int, k: int) -> GaussianModel:
        """Inverse of :meth:`pack`."""
        flat = np.asarray(flat)
        o = np.cumsum([0, 3 * n, 3 * n, 4 * n, n, 3 * k * n])
        return GaussianModel(flat[o[0]:o[1]].reshape(n, 3).copy(), flat[o[1]:o[2]].reshape(n, 3).copy(),
                             flat[o[2]:o[3]].reshape(n, 4).copy(), flat[o[3]:o[4]].copy(),
                             flat[o[4]:o[5]].reshape(n, k, 3).copy())


def block_table(layout: ParamLayout, blocks: int) -> np.ndarray:
    """Per workgroup block of BLOCK floats: (segment index, (block start - segment start) mod
    period) when the block lies inside one segment, else (MIXED, 0) (the kernel then looks the
    segment up per element). Shape (blocks, 2) uint32."""
    table = np.zeros((blocks, 2), np.uint32)
    table[:, 0] = MIXED
    lo = np.arange(blocks, dtype=np.int64) * BLOCK
    hi = lo + BLOCK
    for q, s in enumerate(layout.segments):
        inside = (lo >= s.start) & (hi <= s.start + s.count)
        table[inside, 0] = q
        table[inside, 1] = (lo[inside] - s.start) % s.period
    return table


class GpuAdam:
    """Adam on flat device buffers (``params``, ``grads``, ``m``, ``v`` pool names); 1 dispatch."""

    DISPATCHES = 1

    def __init__(self, gpu: Gpu | GpuContext, config: OptimConfig | None = None, *,
                 params: str = "params", grads: str = "grads", m: str = "adam_m",
                 v: str = "adam_v", zero_grads: bool = True) -> None:
        gpu = Gpu.of(gpu)
        self.ctx, self.pool, self.lib = gpu.ctx, gpu.pool, gpu.lib
        self.config = config or OptimConfig()
        self.names = {"params": params, "grads": grads, "m": m, "v": v}
        self.zero_grads = bool(zero_grads)
        self.module = ADAM.variant().module(self.lib)
        self._pipeline = self.module.pipeline("adam_step", {"ZERO_GRAD": int(self.zero_grads)})
        self.n_uniform = f"{m}_params"
        self.n_blocks = f"{m}_blocks"
        self.n_fused = f"{m}_fused"
        self._fused = None
        self._parts: list = []
        self._uniform = np.zeros((), self.module.struct_dtype("AdamParams"))
        if self._uniform["seg"].shape[0] != MAX_SEGMENTS:
            raise AssertionError("MAX_SEGMENTS differs from AdamParams.seg in adam.wgsl")
        self.pool.get(self.n_uniform, self._uniform.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.layout: ParamLayout | None = None
        self.step = 0
        self.last_lrs: dict[str, float] | None = None

    # -- state --------------------------------------------------------------------------------------
    def configure(self, layout: ParamLayout, *, allocate: bool = True) -> None:
        """Adopt ``layout`` (one buffer each); makes sure the four buffers hold ``layout.total``
        floats (``allocate``). Moments that did not exist yet (or had to grow) start at zero;
        their remapping after densification is the caller's (see :meth:`upload_state`)."""
        self._configure([(0, layout)], allocate=allocate)

    def bind_pages(self, arrays: PagedArrays) -> None:
        """One flat layout per page of the paged storage ``arrays`` (page p of a buffer is
        ``page_name(name, p)``), whose owner allocates the pages."""
        k = arrays.sh_coeffs
        parts = [(page.index, ParamLayout.flat(page.count, k)) for page in arrays.pages]
        self._configure(parts or [(0, ParamLayout.flat(0, k))], allocate=False)

    def _configure(self, parts, roles=("params", "grads", "m", "v"), allocate=True) -> None:
        self.layout = parts[0][1] if len(parts) == 1 else ParamLayout(())
        self._parts = []
        for p, layout in parts:
            if allocate:
                nbytes = 4 * max(layout.total, 1)
                for role in roles:
                    self.pool.get(page_name(self.names[role], p), nbytes)
            u = self._uniform.copy()
            total = layout.total
            groups = max(1, -(-total // (WG * PER_THREAD)))
            gx = min(groups, MAX_GROUPS_X)
            grid = (gx, -(-groups // gx))
            u["sizes"] = (total, len(layout.segments), gx, 0)
            u["seg"][:] = 0
            for i, seg in enumerate(layout.segments):
                u["seg"][i] = (seg.start, seg.start + seg.count, seg.period, seg.split)
                u["lr"][i, 2] = 1.0 / seg.period
            uniform, blocks = page_name(self.n_uniform, p), page_name(self.n_blocks, p)
            self.pool.get(uniform, self._uniform.nbytes, buffer_usage(*UNIFORM_USAGE))
            self.pool.get(blocks, 8 * gx * grid[1])
            self.pool.write(blocks, block_table(layout, gx * grid[1]))
            self._parts.append((p, layout, u, grid))
        self._grid = self._parts[0][3]

    def reset(self, encoder=None) -> None:
        """Zero both moments and the step count (cleared; submitted at once without encoder)."""
        own = encoder is None
        enc = self.ctx.device.create_command_encoder() if own else encoder
        self.pool.encode_clear(enc, self.names["m"])
        self.pool.encode_clear(enc, self.names["v"])
        if own:
            self.ctx.queue.submit([enc.finish()])
        self.step = 0

    def upload_state(self, state: AdamState) -> None:
        """Moments and step count from a host :class:`AdamState` (flat layout)."""
        self.pool.write(self.names["m"], ParamLayout.pack(state.m))
        self.pool.write(self.names["v"], ParamLayout.pack(state.v))
        self.step = int(state.step)

    def read_state(self, n: int, k: int) -> AdamState:
        """Blocking read of the moments into a host :class:`AdamState` (flat layout)."""
        total = ParamLayout.flat(n, k).total
        m = self.pool.read_array(self.names["m"], np.float32, total)
        v = self.pool.read_array(self.names["v"], np.float32, total)
        return AdamState(ParamLayout.unpack(m, n, k), ParamLayout.unpack(v, n, k), self.step)

    # -- the step -----------------------------------------------------------------------------------
    def write_uniform(self, t: int, lrs: dict[str, float] | None = None,
                      grad_scale: float = 1.0) -> dict[str, float]:
        """Write step ``t``'s step sizes and bias correction (queue.write_buffer); the kernel reads
        ``grad_scale · grads`` (1/B: the buffer holds the sum over a batch of B views)."""
        cfg = self.config
        lrs = cfg.lrs(t) if lrs is None else lrs
        bc1, bc2 = cfg.bias_corrections(t)
        inv_bc1 = 1.0 / bc1
        for p, layout, u, _grid in self._parts:
            u["hyper"] = (1.0 - cfg.beta1, cfg.beta2, 1.0 - cfg.beta2, cfg.eps)
            u["hyper2"][0] = np.sqrt(bc2)
            u["hyper2"][1] = grad_scale
            for i, s in enumerate(layout.segments):
                rest = s.rest_group or s.group
                # float64 product rounded to f32, as the reference's float32 update does.
                u["lr"][i, :2] = (lrs[s.group] * inv_bc1, lrs[rest] * inv_bc1)
            self.pool.write(page_name(self.n_uniform, p), u)
        self._uniform = self._parts[0][2]
        return lrs

    def encode(self, cpass, lrs: dict[str, float] | None = None,
               grad_scale: float = 1.0) -> dict[str, float]:
        """Advance the step count, write the uniform and record the dispatch into ``cpass``.

        ``lrs`` defaults to ``config.lrs(t)`` for the new step ``t``; returns the rates used.
        ``grad_scale`` multiplies the gradients as read (1/B after a batch of B views)."""
        if self.layout is None:
            raise RuntimeError("GpuAdam.configure() is needed before encode()")
        self.step += 1
        self.last_lrs = self.write_uniform(self.step, lrs, grad_scale)
        n = self.names
        cpass.set_pipeline(self._pipeline)
        for p, layout, _u, grid in self._parts:
            if layout.total == 0:
                continue
            bg = self.pool.bind_group(self.module, 0, {
                "ap": page_name(self.n_uniform, p), "params": page_name(n["params"], p),
                "grads": page_name(n["grads"], p), "m1": page_name(n["m"], p),
                "m2": page_name(n["v"], p), "blocks": page_name(self.n_blocks, p)})
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(*grid)
        return self.last_lrs

    def encode_fused(self, lrs: dict[str, float] | None = None, grad_scale: float = 1.0) -> str:
        """Advance the step count and write the uniform of the Adam update that the projection
        backward pass applies (``shaders/adam_sink.wgsl``); returns its pool name."""
        cfg = self.config
        self.step += 1
        lrs = cfg.lrs(self.step) if lrs is None else lrs
        bc1, bc2 = cfg.bias_corrections(self.step)
        inv_bc1 = 1.0 / bc1
        u = self._fused
        u["hyper"] = (1.0 - cfg.beta1, cfg.beta2, 1.0 - cfg.beta2, cfg.eps)
        u["hyper2"][:2] = (np.sqrt(bc2), grad_scale)
        u["lr0"] = [lrs[g] * inv_bc1 for g in ("means", "log_scales", "quats", "opacity_logits")]
        u["lr1"][:2] = (lrs["sh_dc"] * inv_bc1, lrs["sh_rest"] * inv_bc1)
        self.pool.write(self.n_fused, u)
        self.last_lrs = lrs
        return self.n_fused

    def fused_dtype(self, dtype) -> None:
        """The FusedAdam struct of adam_sink.wgsl (given by the module that includes it)."""
        if self._fused is None or self._fused.dtype != dtype:
            self._fused = np.zeros((), dtype)
            self.pool.get(self.n_fused, dtype.itemsize, buffer_usage(*UNIFORM_USAGE))

    def run(self, lrs: dict[str, float] | None = None) -> dict[str, float]:
        """One step in its own submit (tests, tools)."""
        with self.ctx.guard("running the Adam step"):
            enc = self.ctx.device.create_command_encoder(label="adam")
            cpass = enc.begin_compute_pass(label="adam")
            out = self.encode(cpass, lrs)
            cpass.end()
            self.ctx.queue.submit([enc.finish()])
        return out
