"""Backward passes of the GPU step (docs/design.md §3), recorded into the caller's pass.

- ``shaders/raster_backward.wgsl``: one workgroup per tile, back to front, per-splat gradients of
  the 2D mean, conic, colour and opacity accumulated into ``grad2d`` (12 floats per splat) with one
  global atomic per non-zero component per splat per round of ``batch`` splats per tile. The atomic
  is a hardware float atomic when the adapter has ``shader-float32-atomic`` and a compare-and-swap
  loop on ``atomic<u32>`` otherwise (``float_atomics=False`` forces it, for tests and DX12 parity).
  Partial sums are reduced per subgroup first (an xor butterfly of subgroup shuffles) where the adapter has subgroups,
  otherwise through workgroup memory per thread (``subgroups=False`` forces it).
- ``shaders/project_backward.wgsl``: one thread per Gaussian, once per page of the state
  (:mod:`.pages`), chains ``grad2d`` to every stored parameter (into ``grads``, the flat layout of
  ``params``; or, ``fused``, straight into the Adam update of the parameter: no gradient buffer),
  zeroes ``grad2d`` for the next step and accumulates the strategy's statistics in ``stats`` (one
  plane of n floats each per page; the code is generated from their declarations,
  :func:`~wgsl_splat.training.statistics.statistics_wgsl`).

Both read the forward pass's buffers by the renderer's pool names, so the backward pass reuses the
forward's sort, ranges, final transmittance and last-contributor index instead of recomputing them.
"""

from __future__ import annotations

import numpy as np

from ..training.losses import LossConfig, ParamTerm
from ..training.statistics import STANDARD, resolve, statistics_wgsl
from .loss import SLOT
from .pages import SPLAT_BYTES, page_name
from .pool import UNIFORM_USAGE, BufferPool, buffer_usage
from .renderer import GpuRenderer
from .runtime import GpuContext, GpuError
from .shaders import ShaderLibrary
from .sort import grid_2d

GRAD2D_FLOATS = 12          # per splat: (mean2d x, y, opacity, -), (conic a, b, c, -), (r, g, b, -)
PARTIALS_BYTES = 12288      # workgroup memory for the per-round partial sums of raster_backward


# Where each parameter group lives in the flat layout (the offsets of RenderParams), and its width.
GROUP_LAYOUT = {"means": ("0u", 3), "log_scales": ("rp.offs.x", 3), "quats": ("rp.offs.y", 4),
                "opacity_logits": ("rp.offs.z", 1)}


def param_terms_wgsl(active: list[ParamTerm]) -> str:
    """``param_terms.wgsl`` for ``project_backward.wgsl`` from the loss's parameter terms
    (:mod:`wgsl_splat.training.losses`): the weights' uniform (one field per declared term) and
    ``add_param_terms(i, n)``, which adds the active terms' gradients of row ``i`` to ``grads`` and
    returns its share of their value. Only the active terms are compiled in: no branch on a weight
    (lavapipe re-specialises a pipeline whose control flow depends on a uniform, every step)."""
    from ..training.losses import PARAM_TERMS

    lines = ["// Generated from wgsl_splat/training/losses.py (PARAM_TERMS) by gpu/backward.py.",
             "struct LossTerms {"] + [f"    {t.weight}: f32," for t in PARAM_TERMS] + [
             "}", f"const PARAM_TERMS: bool = {str(bool(active)).lower()};"]
    for term in active:
        lines += [f"fn term_{term.weight}(x: f32) -> vec2<f32> {{", f"    {term.wgsl}", "}"]
    lines += ["fn add_param_terms(i: u32, n: u32) -> f32 {", "    var value = 0.0;"]
    for term in active:
        if term.group not in GROUP_LAYOUT:
            raise ValueError(f"parameter term {term.weight}: group {term.group} has no WGSL layout")
        offset, width = GROUP_LAYOUT[term.group]
        lines += [f"    let w_{term.weight} = lt.{term.weight} / f32({width}u * n);",
                  f"    for (var c = 0u; c < {width}u; c = c + 1u) {{",
                  f"        let o = {offset} + {width}u * i + c;",
                  f"        let fd = term_{term.weight}(params[o]);",
                  f"        grads[o] = grads[o] + w_{term.weight} * fd.y;",
                  f"        value = value + w_{term.weight} * fd.x;", "    }"]
    lines += ["    return value;", "}"]
    return "\n".join(lines) + "\n"


def project_includes(statistics=STANDARD, terms=()) -> dict[str, str]:
    """The generated includes of ``project_backward.wgsl``: the statistics' accumulation and the
    parameter terms."""
    return {"statistics.wgsl": statistics_wgsl(resolve(statistics)),
            "param_terms.wgsl": param_terms_wgsl(list(terms))}


class GpuBackward:
    """Records rasterisation backward and projection backward (2 dispatches)."""

    DISPATCHES = 2

    def __init__(self, ctx: GpuContext, pool: BufferPool, lib: ShaderLibrary, renderer: GpuRenderer,
                 *, float_atomics: bool | None = None, subgroups: bool | None = None,
                 rows: int | None = None, statistics=STANDARD,
                 loss: LossConfig | None = None, history: int = 1) -> None:
        self.ctx = ctx
        self.pool = pool
        self.lib = lib
        self.renderer = renderer
        if float_atomics is None:
            float_atomics = ctx.has_float_atomics
        if float_atomics and not ctx.has_float_atomics:
            raise GpuError(f"{ctx.name} has no shader-float32-atomic; use the compare-and-swap variant")
        self.float_atomics = bool(float_atomics)
        if subgroups is None:
            subgroups = ctx.has_subgroups
        if subgroups and not ctx.has_subgroups:
            raise GpuError(f"{ctx.name} has no subgroup operations; use the workgroup reduction")
        self.subgroups = bool(subgroups)
        rows = rows or renderer.raster_rows
        if rows not in (4, 8, 16):
            raise ValueError("rows must be 4, 8 or 16")
        cols = renderer.raster_cols if rows == renderer.raster_rows else 1
        threads = (16 // cols) * (16 // rows)
        self.rows = rows
        self.cols = cols
        self.batch = min(threads, PARTIALS_BYTES // (48 * threads))
        config = renderer.config
        self._raster = lib.module("raster_backward", {
            "ROWS": rows, "COLS": cols, "THREADS_X": 16 // cols, "THREADS_Y": 16 // rows,
            "BATCH": self.batch,
            "ATOMICS": "atomic_float.wgsl" if self.float_atomics else "atomic_cas.wgsl",
            "PARTIALS": "partials_subgroup.wgsl" if self.subgroups else "partials_workgroup.wgsl"},
            config=config)
        self.statistics = resolve(statistics)
        self.terms = (loss or LossConfig()).active_terms()
        self._includes = project_includes(self.statistics, [term for term, _ in self.terms])
        self._project = lib.module("project_backward", {"SINK": "grads_sink.wgsl"}, config=config,
                                   generated=self._includes)
        self._project_fused = None
        pool.get("no_grad2d_hi", SPLAT_BYTES)        # binds grad2d_hi while every id is below
        weights = np.zeros((), self._project.struct_dtype("LossTerms"))
        for term, weight in self.terms:
            weights[term.weight] = weight
        pool.get("loss_terms", weights.nbytes, buffer_usage(*UNIFORM_USAGE))
        pool.write("loss_terms", weights)
        pool.get("term_partials", 4)
        self._terms = None
        if self.terms:   # the terms' value joins the step's loss (one uniform slot per loss slot)
            self._terms = lib.module("loss_terms", config=config)
            slots = np.zeros(history, self._terms.struct_dtype("TermsSlot", stride=SLOT))
            slots["slot"] = np.arange(history)
            self._terms_slot_bytes = self._terms.struct_dtype("TermsSlot").itemsize
            pool.get("loss_terms_slots", slots.nbytes, buffer_usage(*UNIFORM_USAGE))
            pool.write("loss_terms_slots", slots)
        self.num = 0

    @property
    def variant(self) -> str:
        return (f"{'float atomics' if self.float_atomics else 'CAS loop'}, "
                f"{'subgroup' if self.subgroups else 'workgroup'} reduction")

    @property
    def fusable(self) -> bool:
        """Whether Adam can run inside the projection backward pass (no parameter term: their
        gradients are added after the pass's own, which the in-place update would have used)."""
        return not self.terms

    def fused_module(self):
        """project_backward.wgsl with the Adam sink (compiled on first use)."""
        if self._project_fused is None:
            self._project_fused = self.lib.module("project_backward", {"SINK": "adam_sink.wgsl"},
                                                  config=self.renderer.config,
                                                  generated=self._includes)
        return self._project_fused

    @property
    def n_stats(self) -> int:
        return max(len(self.statistics), 1)

    def configure(self, n: int, stats: np.ndarray | None = None) -> None:
        """Size the per-splat buffers for ``n`` Gaussians; ``stats`` (S, n) float32, one row per
        statistic in order, replaces the statistics (zeros when None). ``grad2d`` is cleared so
        that the next backward pass accumulates into zeros."""
        self.resize(n)
        data = (np.zeros((self.n_stats, max(self.num, 1)), np.float32) if stats is None
                else np.asarray(stats, np.float32).reshape(-1, self.num))
        for page in self.renderer.pages or []:
            sl = slice(page.base, page.base + page.count)
            self.pool.write(page_name("stats", page.index), np.ascontiguousarray(data[:, sl]))
        if not self.renderer.pages:
            self.pool.write("stats", np.zeros(1, np.float32))

    def alloc_stats(self, name: str, n: int) -> None:
        """Pages of the statistics for ``n`` rows under ``name`` (existing pages of the right size
        are kept): one plane of each page's rows per statistic."""
        paging = self.renderer.paging
        pages = paging.pages(n) or [paging.pages(1)[0]]
        for page in pages:
            self.pool.get(page_name(name, page.index), 4 * self.n_stats * max(page.count, 1),
                          exact=True)
        p = len(pages)
        while page_name(name, p) in self.pool:
            self.pool.free(page_name(name, p))
            p += 1

    def resize(self, n: int) -> None:
        """Size the per-splat buffers for ``n`` Gaussians, keeping the statistics (a device-side
        edit of the state rebuilt them already); ``grad2d`` is cleared."""
        self.num = int(n)
        m = max(self.num, 1)
        split = self.renderer.paging.split
        self.pool.get("grad2d", 4 * GRAD2D_FLOATS * min(m, split), exact=True)
        if self.num > split:
            self.pool.get("grad2d_hi", 4 * GRAD2D_FLOATS * (self.num - split), exact=True)
        else:
            self.pool.free("grad2d_hi")
        block = self._project.workgroup_size("project_backward")[0]
        self.pool.get("term_partials", 4 * -(-m // block))
        self.alloc_stats("stats", self.num)
        with self.ctx.guard("clearing the screen-space gradients"):
            enc = self.ctx.device.create_command_encoder(label="clear grad2d")
            enc.clear_buffer(self.pool["grad2d"])
            if "grad2d_hi" in self.pool:
                enc.clear_buffer(self.pool["grad2d_hi"])
            self.ctx.queue.submit([enc.finish()])

    def encode_raster(self, cpass, grad_image: str = "grad_image") -> None:
        r = self.renderer
        cpass.set_pipeline(self._raster.pipeline("rasterize_backward"))
        cpass.set_bind_group(0, self.pool.bind_group(self._raster, 0, {
            "rp": "render_params", **r.splat_bindings(), "isect_ids": "isect_ids",
            "ranges": "ranges", "last_contrib": "last_contrib",
            "grad_image": grad_image, **r.splat_bindings("grad2d")}))
        cpass.dispatch_workgroups(r.tiles_x, r.tiles_y)

    def encode_project(self, cpass, *, stats: bool = True, accumulate: bool = False,
                       adam: str | None = None) -> None:
        """Parameter gradients into ``grads``: written, or with ``accumulate`` added to what the
        earlier views of a batch left there. ``adam``: the fused Adam uniform's pool name (the
        step's update instead of gradients; moments in ``adam_m``/``adam_v``)."""
        if not self.num:
            return
        r = self.renderer
        module = self._project if adam is None else self.fused_module()
        cpass.set_pipeline(module.pipeline("project_backward", {
            "STATS": int(stats), "ACCUMULATE": int(accumulate), **r.sh_constants}))
        block = module.workgroup_size("project_backward")[0]
        for page in r.pages:
            p = page.index
            entries = {
                "rp": r.page_uniform(page), "params": page_name("params", p),
                "splats": r.paging.splat_window("splats", page),
                "grad2d": r.paging.splat_window("grad2d", page),
                "stats": page_name("stats", p), "filter3d": r.filter_window(page),
                "lt": "loss_terms", "term_partials": "term_partials"}
            if adam is None:
                entries["grads"] = page_name("grads", p)
            else:
                entries.update(adam_m=page_name("adam_m", p), adam_v=page_name("adam_v", p),
                               ap=adam)
            cpass.set_bind_group(0, self.pool.bind_group(module, 0, entries))
            cpass.dispatch_workgroups(*grid_2d(-(-page.count // block)))

    def encode_terms(self, cpass, result: str, slot: int) -> None:
        """Add the parameter terms' value to loss slot ``slot`` of the ring ``result`` (after
        :meth:`encode_project`; nothing without active terms)."""
        if self._terms is None:
            return
        cpass.set_pipeline(self._terms.pipeline("add_terms"))
        cpass.set_bind_group(0, self.pool.bind_group(self._terms, 0, {
            "ts": ("loss_terms_slots", 0, self._terms_slot_bytes), "rp": "render_params", "term_partials": "term_partials",
            "result": result}), [slot * SLOT])
        cpass.dispatch_workgroups(1)

    def encode(self, cpass, grad_image: str = "grad_image", *, stats: bool = True) -> None:
        """Both stages (the forward pass and dL/dimage must already be recorded)."""
        if self.num:
            self.encode_raster(cpass, grad_image)
        self.encode_project(cpass, stats=stats)

    def read_stats(self) -> np.ndarray:
        """(S, N) float32: the statistics in order (blocking reads, page by page)."""
        s = len(self.statistics)
        parts = [self.pool.read_array(page_name("stats", p.index), np.float32,
                                      s * p.count).reshape(s, p.count)
                 for p in self.renderer.pages]
        return np.concatenate(parts, axis=1) if parts else np.zeros((s, 0), np.float32)
