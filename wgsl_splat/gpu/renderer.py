"""The forward pipeline on the GPU: one command encoder and one submit per render.

Per render (all in one compute pass; wgpu inserts the barriers between dispatches):

1. ``project.wgsl``  project + EWA + SH colour per Gaussian; seeds the depth sort    (1 dispatch)
2. ``radix.wgsl``    stable radix sort of the N splats by depth (f32 bits, 4 x 8 bits)  (12 or 20)
3. emission of the (tile, splat) pairs in (tile, depth) order, one of two (``Layout.emission``):
   ``"table"`` (CPU adapters; 3 dispatches, 6 with parallel scans)
     ``emit.wgsl``  per (tile, chunk of depth-sorted splats) intersection counts
     ``scan.wgsl``  prefix sum of those counts -> offsets, tile ranges, counters
     ``emit.wgsl``  splat ids written straight to their sorted position
   ``"splats"`` (GPUs; 7 dispatches + the radix sort's)
     ``emit_splats.wgsl``  per depth-sorted splat its pair count; ``prefix.wgsl`` their offsets;
                           the counters; each splat's pairs (tile key, id) at its offset
     ``radix.wgsl``        stable sort of the pairs by tile key (2 digits up to 65 536 tiles)
     ``sorted_ranges.wgsl`` each tile's range by binary search in the sorted keys
4. ``raster.wgsl``   one workgroup per 16x16 tile, front-to-back compositing             (1)

Either way the pairs come from a stable depth sort of the N splats, emitted in depth order and
ordered by tile stably, so both give the same list. The table never sorts the pairs, which suits
lavapipe (there the radix sort of the pairs by tile cost more than the rest of the pipeline
together, docs/benchmarks.md); but its threads are bounded by the table's size (2 056 at 1080p),
and on an H200 it was 36 % of the step at 1 M Gaussians: the GPU layout emits per splat, whose
threads grow with N. A bitonic sort of the (tile, depth, id) key (sort.py, ``BitonicSorter``) was
10-20x slower than a radix sort on lavapipe.

Intersection count and capacity. Buffers of intersections are sized by a capacity; the count is
computed on the GPU and every later stage reads it from the ``counters`` buffer, so steady-state
renders need no read-back at all. Emission never writes past the capacity and the GPU sets an
overflow flag instead. The host looks at the counters (16 bytes) only (a) together with the image
when the caller asks for the image anyway (same copy, same map), and (b) on the first render after
the model or the image size changed (the only times the capacity is likely to have to grow). When
the count exceeds the capacity, the buffers grow to 1.5 x the count and the render is redone, so a
returned image is complete -- unless the view needs more intersections than one storage binding
holds (:attr:`GpuRenderer.max_capacity`): then it is drawn without the pairs past that, counted in
:attr:`GpuRenderer.clipped_renders` for the caller's one line (:meth:`GpuRenderer.clip_note`). A training loop that renders without read-back can call
:meth:`GpuRenderer.check_capacity` (one 16-byte read) whenever it wants a guarantee, e.g. after
densification; :attr:`GpuRenderer.overflowed` tells whether the last checked render was clipped.
"""

from __future__ import annotations

import numpy as np

from ..camera import Camera
from ..env import size_text
from ..model import GaussianModel, param_offsets, sh_degree_from_coeffs
from ..render_config import CLASSIC, RenderConfig
from . import kernels
from .device import Gpu
from .layout import Layout
from .pages import (
    PARAMS,
    RECT_BYTES,
    SPLAT_BYTES,
    ModelTooLargeError,
    Page,
    PagedArrays,
    Paging,
    page_name,
    row_bytes,
    row_window,
)
from .pool import STAGING_CHUNK, UNIFORM_USAGE, buffer_usage
from .runtime import GpuContext
from .sort import PrefixScan, RadixSorter, grid_2d

COUNTERS_BYTES = 32        # counters[0..8)
MIN_CAPACITY = 16384
# Bytes per Gaussian a forward render holds besides the parameters (4·(11 + 3K)): the splat (48),
# its rectangle (16), the depth sort's keys and ids, twice (16), and room for four intersections
# (the initial capacity) at the per-splat emission's 16 bytes each (tile key and id, twice, for
# their sort; the table's ids take 4) plus its pair count (4). What render and view check a model
# against before uploading it.
RENDER_ROW_BYTES = SPLAT_BYTES + RECT_BYTES + 16 + 4 * 16 + 4
# Per pixel: the image (12), last contributor and final transmittance (8).
RENDER_PIXEL_BYTES = 20

__all__ = [
    "COUNTERS_BYTES",
    "SPLAT_BYTES",
    "GpuRenderer",
    "ModelTooLargeError",
    "check_model_fits",
    "max_gaussians",
    "render_bytes",
]


def max_gaussians(ctx: GpuContext, sh_coeffs: int, other_bytes: tuple = ()) -> int:
    """The most Gaussians the adapter's bindings reach (:attr:`Paging.max_rows`: pages make the
    state itself unbounded; two bindings of splat records and the rectangles bound N).
    ``other_bytes``: per-Gaussian records of a caller bound whole (none now; kept for callers)."""
    cap = Paging(ctx.max_binding_bytes, sh_coeffs).max_rows
    for b in other_bytes:
        cap = min(cap, ctx.max_binding_bytes // max(int(b), 1))
    return cap


def render_bytes(n: int, sh_coeffs: int, pixels: int = 0) -> int:
    """Device memory a forward render of ``n`` Gaussians and ``pixels`` pixels needs (about)."""
    return n * (row_bytes(sh_coeffs) + RENDER_ROW_BYTES) + pixels * RENDER_PIXEL_BYTES


def check_model_fits(ctx: GpuContext, n: int, sh_coeffs: int, other_bytes: tuple = (),
                     pixels: int = 0, probe: bool = False) -> None:
    """:class:`ModelTooLargeError` (one line, with the figures) when the bindings cannot reach
    ``n`` Gaussians or a render of them needs more than the device's memory budget; ``probe``:
    on a device of unknown memory (a GPU), more than it can allocate now."""
    cap = max_gaussians(ctx, sh_coeffs, other_bytes)
    degree = sh_degree_from_coeffs(sh_coeffs)
    if n > cap:
        raise ModelTooLargeError(
            f"{n} Gaussians at SH degree {degree} do not fit this adapter, whose "
            f"{size_text(ctx.max_binding_bytes)} storage bindings"
            f"{_set_by(getattr(ctx, 'binding_setting', None))} reach at most {cap} "
            f"(at SH degree 0: {max_gaussians(ctx, 1, other_bytes)})")
    budget = ctx.memory_bytes
    need = render_bytes(n, sh_coeffs, pixels)
    if budget is not None and need > budget:
        raise ModelTooLargeError(
            f"{n} Gaussians at SH degree {degree} need {size_text(need)} of device memory to "
            f"render; this adapter has {size_text(budget)}"
            f"{_set_by(getattr(ctx, 'memory_setting', None))}")
    if budget is None and probe and not ctx.can_allocate(need):
        raise ModelTooLargeError(
            f"{n} Gaussians at SH degree {degree} need {size_text(need)} of device memory to "
            f"render; this GPU could not allocate that much")


def _set_by(setting: str | None) -> str:
    """`` (WGSL_SPLAT_…=value)`` for a limit an environment variable set, else nothing."""
    return f" ({setting})" if setting else ""


class GpuRenderer:
    """Renders a Gaussian model held on the device.

    Pool buffer names (see :attr:`buffer_names`) are stable so that the backward pass can bind them:
    ``params`` (flat float32 per page, :mod:`.pages`: means 3n | log_scales 3n | quats 4n |
    opacity logits n | sh n*K*3; page p > 0 in ``params@p``), ``splats`` (Splat2D per Gaussian;
    beyond :attr:`Paging.split` in ``splats_hi``), ``rects`` (vec4<u32>), the depth-sorted ids,
    ``isect_ids`` (splat id of each intersection in (tile, depth) order), ``ranges`` (vec2<u32>
    [start, end) per tile), ``image`` (H*W*3 f32), ``last_contrib`` (H*W u32, then the final
    transmittance of each pixel, H*W f32 bits), ``counters`` (u32: total intersections, min(total,
    capacity), the pairs emission's passes disagreed on, overflow, N), ``filter3d`` (f32 per Gaussian: the antialiased mode's 3D filter;
    a 256-byte placeholder in the classic mode, which never reads it).

    ``config`` (:class:`~wgsl_splat.render_config.RenderConfig`) fixes the render constants and the
    mode of every shader this renderer compiles.
    """

    # Entries of the (tile, chunk) count table: 8 MiB on CPU adapters; 64 MiB on GPUs, where more
    # chunks mean more parallel emission (an H100 at 1080p: 257 chunks of ~780 serial splats each
    # made emission 58% of the step with the smaller table).
    TABLE_MAX_CPU = 1 << 21
    TABLE_MAX_GPU = 1 << 24

    def __init__(self, gpu: Gpu | GpuContext, *, layout: Layout | None = None,
                 config: RenderConfig | None = None, initial_capacity: int | None = None,
                 arrays: PagedArrays | None = None) -> None:
        self.gpu = Gpu.of(gpu)
        self.ctx, self.pool, self.lib = self.gpu.ctx, self.gpu.pool, self.gpu.lib
        # the paged per-Gaussian storage (N lives there): the training step's, or its own
        self.arrays = arrays or PagedArrays(self.pool, self.ctx.max_binding_bytes)
        self.config = config or CLASSIC
        self.layout = layout or Layout.of(self.ctx)
        self.depth_sort = RadixSorter(self.lib, self.pool, "depth", self.layout)
        self.per_splat = self.layout.emission == "splats"
        if self.per_splat:
            # pair counts -> offsets; the pairs (tile key, id) sorted by tile
            self.emit_scan = PrefixScan(self.lib, self.pool, "emit")
            self.pair_sort = RadixSorter(self.lib, self.pool, "isect", self.layout)
        else:
            self.emit_scan = (PrefixScan(self.lib, self.pool, "emit") if self.layout.parallel_scan
                              else None)
            self.pair_sort = None
        if self.emit_scan is None:
            self.pool.get("no_scan_sums", 16)   # binds scan.wgsl's scan_sums, unused by scan_counts
        self.chunks = 0
        self.active_sh_degree = 0
        self.capacity = 0
        self._initial_capacity = initial_capacity
        self.width = self.height = 0
        self.tiles_x = self.tiles_y = 0
        self._check_next = True
        self.overflowed = False
        self.last_count: int | None = None
        #: pairs emission's two passes disagreed on, summed over the renders whose counters were
        #: read (emit.wgsl: the writes stay in their cells; nonzero means the image lost or
        #: skipped borderline pairs, never that it read a stale id)
        self.emission_disagreements = 0
        #: override constants of emit_keys alone (tests perturb its tile test through it)
        self.emit_keys_constants: dict = {}
        self.renders = 0
        self.redos = 0
        #: renders of a view needing more intersections than one storage binding holds
        #: (:attr:`max_capacity`): rendered with the pairs past it dropped, never refused
        self.clipped_renders = 0
        self.most_needed = 0
        self._project = kernels.PROJECT.variant(self.config).module(self.lib)
        if self.per_splat:
            self._emit = kernels.EMIT_SPLATS.variant(self.config).module(self.lib)
            self._ranges = kernels.SORTED_RANGES.variant(self.config).module(self.lib)
        else:
            self._emit = kernels.EMIT.variant(self.config).module(self.lib)
            self._scan = kernels.SCAN.variant(self.config).module(self.lib)
        self._params = np.zeros((), self._project.struct_dtype("RenderParams"))
        self.pool.get("render_params", self._params.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.get("counters", COUNTERS_BYTES)
        self.pool.get("no_splats_hi", SPLAT_BYTES)      # binds splats_hi while every id is below
        self.pool.get("no_filter3d", 16)                # binds filter3d in the classic mode
        self._raster = kernels.raster(self.layout, self.config).module(self.lib)

    # -- model --------------------------------------------------------------------------------------
    def upload_model(self, model: GaussianModel, filter_3d: np.ndarray | None = None, *,
                     keep_filter: bool = False) -> None:
        """Copy the parameters to the device (float32, the flat layout of each page) and size the
        per-splat buffers.

        Antialiased mode: ``filter_3d`` (N,) is the 3D filter of every Gaussian (None: zeros, i.e.
        the 2D Mip filter alone); with ``keep_filter`` and an unchanged N the device's filter stays
        (the training step re-uploads parameters without invalidating it)."""
        n = len(model)
        if filter_3d is not None and np.shape(filter_3d) != (n,):
            raise ValueError(f"filter_3d must have shape ({n},), got {np.shape(filter_3d)}")
        keep_filter = keep_filter and n == self.num and "filter3d" in self.pool
        self.resize(n, model.sh.shape[1])
        self.arrays.write(PARAMS, model)
        if self.config.antialiased and not keep_filter:
            self.pool.write("filter3d", np.zeros(n, np.float32) if filter_3d is None
                            else np.asarray(filter_3d, np.float32))

    def resize(self, n: int, k: int) -> None:
        """Adopt ``n`` Gaussians with ``k`` SH coefficients whose parameters are (or are about to
        be) in the ``params`` pages already (a device-side edit of the state, or
        :meth:`upload_model`): pages, offsets and per-splat buffers follow; nothing is uploaded."""
        check_model_fits(self.ctx, n, k)
        self.arrays.resize(n, k)
        m = max(n, 1)
        split = self.paging.split
        self.pool.get("splats", SPLAT_BYTES * min(m, split), exact=True)
        if n > split:
            self.pool.get("splats_hi", SPLAT_BYTES * (n - split), exact=True)
        else:
            self.pool.free("splats_hi")
        self.pool.get("rects", RECT_BYTES * m, exact=True)
        if self.config.antialiased:
            self.pool.get("filter3d", 4 * m, exact=True)
        self.depth_sort.configure(m, 32, count_slot=4, exact=True)
        if self.capacity == 0:
            self._set_capacity(self._initial_capacity or max(MIN_CAPACITY, 4 * n))
        self._configure_emission()
        self._check_next = True

    def page_uniform(self, page: Page) -> str:
        """The RenderParams of ``page``'s dispatches (the global one when there is one page)."""
        return "render_params" if len(self.pages) <= 1 else f"render_params@{page.index}"

    def splat_bindings(self, name: str = "splats") -> dict:
        """``name`` and ``{name}_hi`` for the kernels that reach a splat by its id."""
        split = self.paging.split
        lo = ((name, 0, SPLAT_BYTES * min(max(self.num, 1), split)))
        hi = ((f"{name}_hi", 0, SPLAT_BYTES * (self.num - split)) if self.num > split
              else ("no_splats_hi" if name == "splats" else f"no_{name}_hi"))
        return {name: lo, f"{name}_hi": hi}

    @property
    def filter_name(self) -> str:
        return "filter3d" if self.config.antialiased else "no_filter3d"

    def filter_window(self, page: Page) -> tuple | str:
        return row_window("filter3d", page, 4) if self.config.antialiased else "no_filter3d"

    # -- the paged storage's size, read by every stage ------------------------------------------------
    @property
    def num(self) -> int:
        return self.arrays.num

    @property
    def sh_coeffs(self) -> int:
        return self.arrays.sh_coeffs

    @property
    def sh_degree(self) -> int:
        return self.arrays.sh_degree

    @property
    def offsets(self) -> tuple:
        return self.arrays.offsets

    @property
    def paging(self) -> Paging:
        return self.arrays.paging

    @property
    def pages(self) -> list[Page]:
        return self.arrays.pages

    @property
    def num_params(self) -> int:
        """Floats of the parameters (all pages)."""
        return self.arrays.num_params

    # -- sizing -------------------------------------------------------------------------------------
    @property
    def max_capacity(self) -> int:
        """The most intersections ``isect_ids`` holds within one storage binding."""
        return self.ctx.max_binding_bytes // 4 // 1024 * 1024

    def _set_capacity(self, capacity: int) -> None:
        self.capacity = min(int(-(-int(capacity) // 1024) * 1024), self.max_capacity)
        if self.per_splat:
            self._configure_pair_sort()
        else:
            self.pool.get("isect_ids", 4 * self.capacity)

    @property
    def isect_ids(self) -> str:
        """The pool buffer of the splat id of each intersection in (tile, depth) order."""
        return self.pair_sort.result[1] if self.per_splat else "isect_ids"

    @property
    def emission_threads(self) -> int:
        """Threads of emission's two walks over the splats (what bench reports)."""
        return self.num if self.per_splat else self.chunks

    def _configure_emission(self) -> None:
        if self.per_splat:
            n = max(self.num, 1)
            self.pool.get("emit_counts", 4 * n)
            self.emit_scan.configure(n)
            self._configure_pair_sort()
        else:
            self._configure_chunks()

    def _configure_pair_sort(self) -> None:
        """The pairs' sort: ``capacity`` pairs, keys up to the tile count (the key of an empty
        slot, emit_splats.wgsl's), the count in counters[1]."""
        if self.capacity:
            tiles = self.tiles_x * self.tiles_y
            self.pair_sort.configure(self.capacity, max(1, tiles.bit_length()), count_slot=1)

    def _configure_chunks(self) -> None:
        """Chunks of depth-sorted splats per emission thread: at least 16 splats per chunk, and a
        (tiles x chunks) table of at most TABLE_MAX entries."""
        tiles = max(1, self.tiles_x * self.tiles_y)
        table_max = self.TABLE_MAX_CPU if self.ctx.adapter_type == "CPU" else self.TABLE_MAX_GPU
        chunks = max(1, min(self.layout.threads, -(-self.num // 16), table_max // tiles))
        self.chunks = chunks if self.num else 0
        self.pool.get("emit_table", 4 * tiles * max(chunks, 1))
        self.pool.get("emit_remaining", 4 * tiles * max(chunks, 1))   # per cell, its pairs to place
        if self.emit_scan is not None:
            self.emit_scan.configure(tiles * self.chunks)

    def _ensure_image(self, width: int, height: int) -> None:
        if (width, height) == (self.width, self.height):
            return
        self.width, self.height = width, height
        self.tiles_x = -(-width // self.config.tile_size)
        self.tiles_y = -(-height // self.config.tile_size)
        if self.tiles_x > 65535 or self.tiles_y > 65535:
            raise ValueError(f"image {width}x{height} too large")
        px = width * height
        self.pool.get("image", 12 * px)
        self.pool.get("last_contrib", 8 * px)    # last contributors, then final transmittances
        self.pool.get("ranges", 8 * self.tiles_x * self.tiles_y)
        self._configure_emission()
        self._check_next = True

    def ensure_capacity(self, intersections: int) -> None:
        """Grow the intersection buffers to hold at least ``intersections`` (never shrinks), or as
        many as one storage binding holds (:attr:`max_capacity`)."""
        if intersections > self.capacity:
            self._set_capacity(max(int(intersections * 1.5), MIN_CAPACITY))

    # -- per-render parameters ----------------------------------------------------------------------
    def _write_params(self, camera: Camera, background, active_sh_degree) -> None:
        p = self._params      # the RenderParams struct of common.wgsl, field by field
        w2c = np.asarray(camera.world_to_camera, np.float64)
        p["w2c0"], p["w2c1"], p["w2c2"] = w2c[:3, :4].astype(np.float32)
        p["cam_pos"][:3] = camera.center
        p["focal"] = (camera.fx, camera.fy, camera.cx, camera.cy)
        clamp = self.config.frustum_clamp
        p["clip"][:2] = (clamp * camera.tan_half_fov_x, clamp * camera.tan_half_fov_y)
        p["background"][:3] = background
        p["img"] = (camera.width, camera.height, self.tiles_x, self.tiles_y)
        deg = self.sh_degree if active_sh_degree is None else min(int(active_sh_degree), self.sh_degree)
        self.active_sh_degree = max(deg, 0)
        p["model"] = (self.num, self.sh_coeffs, self.active_sh_degree, self.capacity)
        p["offs"] = self.offsets
        p["grid"] = (0, self.num, self.chunks, self.paging.split)
        self.pool.write("render_params", p)
        if len(self.pages) > 1:
            # per page: its rows, the offsets of its own flat layout, its first row
            for page in self.pages:
                name = self.page_uniform(page)
                self.pool.get(name, p.nbytes, buffer_usage(*UNIFORM_USAGE))
                q = p.copy()
                q["model"][0] = page.count
                q["offs"] = param_offsets(page.count)
                q["grid"][0] = page.base
                self.pool.write(name, q)

    def prepare(self, camera: Camera, background=(0.0, 0.0, 0.0),
                active_sh_degree: int | None = None) -> None:
        """Size the image buffers for ``camera`` and write the per-render uniforms.

        For callers that record :meth:`encode_forward` into their own encoder (the training step);
        :meth:`render` does this itself.
        """
        if self.capacity == 0:
            raise RuntimeError("upload_model() must be called before rendering")
        self._ensure_image(camera.width, camera.height)
        background = np.broadcast_to(np.asarray(background, np.float64), (3,))
        self._write_params(camera, background, active_sh_degree)

    # -- encoding -----------------------------------------------------------------------------------
    @property
    def buffer_names(self) -> dict[str, str]:
        _, dv = self.depth_sort.result
        return {"params": "params", "splats": "splats", "rects": "rects",
                "depth_sorted_ids": dv, "isect_ids": self.isect_ids, "ranges": "ranges",
                "image": "image", "last_contrib": "last_contrib",
                "counters": "counters", "render_params": "render_params"}

    def buffer(self, role: str):
        """The device buffer for a role of :attr:`buffer_names` (for the backward pass)."""
        return self.pool[self.buffer_names[role]]

    def encode_forward(self, cpass) -> None:
        """Record the forward pipeline into an open compute pass (params already written)."""
        for _name, encode in self.forward_stages():
            encode(cpass)

    def forward_stages(self) -> list:
        """``(name, encode(cpass))`` of the forward stages in order, for callers that time each
        stage in its own pass (profiling); :meth:`encode_forward` records them all in one."""
        stages = [("project", self._encode_project), ("depth sort", self._encode_depth_sort),
                  ("emit+scan", self._encode_emit), ("rasterize", self._encode_raster)]
        return stages if self.num else [("emit+scan", self._encode_emit),
                                        ("rasterize", self._encode_raster)]

    @property
    def sh_constants(self) -> dict[str, int]:
        """The SH layout of the last prepared render as the pipeline constants of gaussian.wgsl."""
        return {"SH_COEFFS": self.sh_coeffs, "SH_ACTIVE": self.active_sh_degree}

    def _encode_project(self, cpass) -> None:
        cpass.set_pipeline(self._project.pipeline("project", self.sh_constants))
        block = self._project.workgroup_size("project")[0]
        keys, ids = self.depth_sort.keys, self.depth_sort.vals
        for page in self.pages:
            cpass.set_bind_group(0, self.pool.bind_group(self._project, 0, {
                "rp": self.page_uniform(page), "params": page_name("params", page.index),
                "splats": self.paging.splat_window("splats", page),
                "rects": row_window("rects", page, RECT_BYTES),
                "depth_keys": row_window(keys, page, 4), "ids": row_window(ids, page, 4),
                "counters": "counters", "filter3d": self.filter_window(page)}))
            cpass.dispatch_workgroups(*grid_2d(-(-page.count // block)))

    def _encode_depth_sort(self, cpass) -> None:
        self.depth_sort.encode(cpass, "counters")

    def _encode_emit(self, cpass) -> None:
        """The pairs in (tile, depth) order, the tile ranges and the counters."""
        if self.per_splat:
            self._encode_emit_splats(cpass)
        else:
            self._encode_emit_table(cpass)

    def _encode_emit_splats(self, cpass) -> None:
        """Per splat its pair count, their offsets and the counters, the pairs, their sort by
        tile, the tile ranges (emit_splats.wgsl)."""
        n = self.num
        grid = grid_2d(-(-n // self._emit.workgroup_size("count_pairs")[0]))
        if n:
            cpass.set_bind_group(0, self._emit_bind_group())
            cpass.set_pipeline(self._emit.pipeline("count_pairs"))
            cpass.dispatch_workgroups(*grid)
        self._encode_scan(cpass)
        if n:
            cpass.set_bind_group(0, self._emit_bind_group())
            cpass.set_pipeline(self._emit.pipeline("write_pairs", self.emit_keys_constants or None))
            cpass.dispatch_workgroups(*grid)
            self.pair_sort.encode(cpass, "counters")
        self._encode_sorted_ranges(cpass)

    def _emit_bind_group(self):
        _, sorted_ids = self.depth_sort.result
        return self.pool.bind_group(self._emit, 0, {
            "rp": "render_params", "rects": "rects", "sorted_ids": sorted_ids,
            "counts": "emit_counts", "pair_tiles": self.pair_sort.keys,
            "pair_ids": self.pair_sort.vals, "emit_counters": "counters",
            "scan_sums": self.emit_scan.sums, **self.splat_bindings()})

    def _encode_sorted_ranges(self, cpass) -> None:
        sorted_tiles, _ = self.pair_sort.result
        cpass.set_pipeline(self._ranges.pipeline("sorted_ranges"))
        cpass.set_bind_group(0, self.pool.bind_group(self._ranges, 0, {
            "rp": "render_params", "sorted_tiles": sorted_tiles, "counters": "counters",
            "ranges": "ranges"}))
        block = self._ranges.workgroup_size("sorted_ranges")[0]
        cpass.dispatch_workgroups(-(-max(self.tiles_x * self.tiles_y, 1) // block))

    def _encode_emit_table(self, cpass) -> None:
        """Per-(tile, chunk) counts, their prefix sum (tile ranges, counters), the emission."""
        pool = self.pool
        n = self.num
        if n:
            _, sorted_ids = self.depth_sort.result
            emit_bg = pool.bind_group(self._emit, 0, {"rp": "render_params", "rects": "rects",
                                                      "sorted_ids": sorted_ids,
                                                      "table": "emit_table",
                                                      "remaining": "emit_remaining",
                                                      "emit_counters": "counters",
                                                      "isect_ids": "isect_ids",
                                                      **self.splat_bindings()})
            cpass.set_bind_group(0, emit_bg)
            cpass.set_pipeline(self._emit.pipeline("emit_count"))
            cpass.dispatch_workgroups(*grid_2d(-(-self.chunks // self._emit.workgroup_size("emit_count")[0])))
        self._encode_scan(cpass)
        if n:
            cpass.set_pipeline(self._emit.pipeline("emit_keys", self.emit_keys_constants or None))
            cpass.set_bind_group(0, emit_bg)
            cpass.dispatch_workgroups(*grid_2d(-(-self.chunks // self._emit.workgroup_size("emit_count")[0])))

    def _encode_scan(self, cpass) -> None:
        """The counts' prefix sum in place and the counters; with the table also the tile ranges
        (scan.wgsl; on GPUs prefix.wgsl first). Per splat: prefix.wgsl, then pair_totals."""
        if self.per_splat:
            if self.num:
                self.emit_scan.encode(cpass, "emit_counts")
            cpass.set_bind_group(0, self._emit_bind_group())
            cpass.set_pipeline(self._emit.pipeline("pair_totals"))
            cpass.dispatch_workgroups(1)
            return
        sums = self.emit_scan.sums if self.emit_scan is not None else "no_scan_sums"
        scan_bg = self.pool.bind_group(self._scan, 0, {"rp": "render_params", "table": "emit_table",
                                                       "ranges": "ranges", "counters": "counters",
                                                       "scan_sums": sums})
        if self.emit_scan is None:
            cpass.set_pipeline(self._scan.pipeline("scan_counts"))
            cpass.set_bind_group(0, scan_bg)
            cpass.dispatch_workgroups(1)
        else:
            self.emit_scan.encode(cpass, "emit_table")
            cpass.set_pipeline(self._scan.pipeline("tile_ranges"))
            cpass.set_bind_group(0, scan_bg)
            block = self._scan.workgroup_size("tile_ranges")[0]
            cpass.dispatch_workgroups(-(-max(self.tiles_x * self.tiles_y, 1) // block))

    def _encode_raster(self, cpass) -> None:
        cpass.set_pipeline(self._raster.pipeline("rasterize"))
        cpass.set_bind_group(0, self.pool.bind_group(self._raster, 0, {
            "rp": "render_params", **self.splat_bindings(), "isect_ids": self.isect_ids,
            "ranges": "ranges", "image": "image", "last_contrib": "last_contrib"}))
        cpass.dispatch_workgroups(self.tiles_x, self.tiles_y)

    @property
    def dispatches_per_render(self) -> int:
        if self.per_splat:
            emit = 2 if not self.num else 2 + 3 + 1 + self.pair_sort.num_dispatches + 1
        else:
            scan = 4 if self.layout.parallel_scan else 1
            emit = scan if not self.num else 2 + scan
        if not self.num:
            return emit + 1
        return len(self.pages) + self.depth_sort.num_dispatches + emit + 1

    # -- render -------------------------------------------------------------------------------------
    def render(self, camera: Camera, background=(0.0, 0.0, 0.0), readback: bool = True,
               active_sh_degree: int | None = None) -> np.ndarray | None:
        """Render ``camera``; returns the (H, W, 3) float32 image when ``readback`` is true.

        One command encoder, one submit. See the module docstring for when the 16-byte counters
        are read back and when a render is redone with larger buffers.
        """
        for _attempt in range(3):
            self.prepare(camera, background, active_sh_degree)
            checked = readback or self._check_next
            img_bytes = 12 * self.width * self.height
            img_slot = -(-img_bytes // 256) * 256 if readback else 0
            # an image beyond one staging chunk (4 MiB: 1280x800 and up) is read after the
            # counters, in chunks; smaller ones come back with them in one copy
            chunked = img_slot + COUNTERS_BYTES > STAGING_CHUNK
            if chunked:
                img_slot = 0
            with self.ctx.guard("encoding and submitting the forward render"):
                staging = self.pool.staging(img_slot + COUNTERS_BYTES) if checked else None
                enc = self.ctx.device.create_command_encoder(label="forward")
                cpass = enc.begin_compute_pass(label="forward")
                self.encode_forward(cpass)
                cpass.end()
                if checked:
                    if readback and not chunked:
                        enc.copy_buffer_to_buffer(self.pool["image"], 0, staging, 0, img_bytes)
                    enc.copy_buffer_to_buffer(self.pool["counters"], 0, staging, img_slot,
                                              COUNTERS_BYTES)
                self.ctx.queue.submit([enc.finish()])
            self.renders += 1
            if not checked:
                return None
            data = self.pool.map_staging(img_slot + COUNTERS_BYTES)
            total, _, disagreed = (int(v) for v in np.frombuffer(data, np.uint32, 3, img_slot))
            self.last_count = total
            self.emission_disagreements += disagreed
            self._check_next = False
            self.overflowed = total > self.capacity
            if not self.overflowed:
                return self._image(readback, chunked, data, img_slot, img_bytes)
            if self.capacity >= self.max_capacity:
                # one binding holds no more: this render dropped the pairs past it (the table's
                # last tiles', the per-splat emission's farthest splats'); clip_note says so
                self.note_clipped(1, total)
                return self._image(readback, chunked, data, img_slot, img_bytes)
            self.ensure_capacity(total)
            self.redos += 1
        raise RuntimeError("intersection capacity did not converge")  # pragma: no cover

    def note_clipped(self, renders: int, needed: int) -> None:
        self.clipped_renders += int(renders)
        self.most_needed = max(self.most_needed, int(needed))

    def _image(self, readback, chunked, data, img_slot, img_bytes):
        """The image of a checked render: from the staging copy, or read after it."""
        if not readback:
            return None
        if chunked:
            return self.pool.read_array("image", np.float32, img_bytes // 4).reshape(
                self.height, self.width, 3)
        return np.frombuffer(data, np.float32, img_bytes // 4).reshape(
            self.height, self.width, 3).copy()

    def clip_note(self) -> str:
        """One line on the clipped renders so far (empty when none)."""
        if not self.clipped_renders:
            return ""
        return (f"{self.clipped_renders} render(s) needed up to {self.most_needed} tile "
                f"intersections, more than the {self.max_capacity} this adapter holds in one "
                f"storage binding: they were drawn without the pairs past it (a smaller image, "
                f"fewer Gaussians or --device cpu renders them whole)")

    @property
    def count_check_due(self) -> bool:
        """True after a model upload or an image-size change, until the intersection count has
        been checked once: callers encoding :meth:`encode_forward` themselves should then call
        :meth:`check_capacity` after their submit (and redo the step if it returns False)."""
        return self._check_next

    def check_capacity(self) -> bool:
        """Read the counters of the last render (16 bytes); grow if it overflowed.

        Returns True when the last render was complete (no intersection dropped).
        """
        c = self.pool.read_array("counters", np.uint32, 4)
        total = int(c[0])
        self.last_count = total   # (its disagreements were counted by whoever read it first)
        self._check_next = False
        self.overflowed = total > self.capacity
        if self.overflowed:
            self.ensure_capacity(total)
        return not self.overflowed

    # -- read-back helpers (tests, debugging; each is a blocking read) ------------------------------
    def intersection_count(self) -> int:
        return int(self.pool.read_array("counters", np.uint32, 1)[0])

    def read_splats(self) -> np.ndarray:
        """(N, 12) float32: every splat record (blocking reads of both splat buffers)."""
        n, split = self.num, self.paging.split
        raw = self.pool.read("splats", SPLAT_BYTES * min(n, split)) if n else b""
        if n > split:
            raw += self.pool.read("splats_hi", SPLAT_BYTES * (n - split))
        return np.frombuffer(raw, np.float32).reshape(n, 12)

    def read_projection(self) -> dict[str, np.ndarray]:
        n = self.num
        raw = self.read_splats()
        return {
            "means2d": raw[:, 0:2].copy(), "depths": raw[:, 2].copy(),
            "opacities": raw[:, 3].copy(), "conics": raw[:, 4:7].copy(),
            "colors": raw[:, 8:11].copy(),
            "radii": raw[:, 7].astype(np.int32),
            "tile_rect": self.pool.read_array("rects", np.uint32, 4 * n).reshape(n, 4).astype(np.int64),
        }

    def read_raster_state(self) -> dict[str, np.ndarray]:
        h, w = self.height, self.width
        count = min(self.intersection_count(), self.capacity)
        names = self.buffer_names
        ranges = self.pool.read_array("ranges", np.uint32, 2 * self.tiles_x * self.tiles_y)
        ranges = ranges.reshape(-1, 2).astype(np.int64)
        tiles = np.repeat(np.arange(len(ranges)), ranges[:, 1] - ranges[:, 0])
        state = self.pool.read_array("last_contrib", np.uint32, 2 * h * w)
        return {
            "final_T": state[h * w:].view(np.float32).reshape(h, w).copy(),
            "last_contrib": state[:h * w].reshape(h, w).astype(np.int32),
            "ranges": ranges,
            "isect_tiles": tiles,
            "isect_ids": self.pool.read_array(self.isect_ids, np.uint32, count).astype(np.int64),
            "depth_sorted_ids": self.pool.read_array(names["depth_sorted_ids"], np.uint32, self.num),
            "image": self.pool.read_array("image", np.float32, 3 * h * w).reshape(h, w, 3),
        }
