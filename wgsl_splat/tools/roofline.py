"""Roofline of the training step: per stage, the work its kernels do (FLOP and bytes, counted from
the WGSL) and the time that work takes at this machine's measured limits, beside the measured time.

The limits are measured, not taken from a data sheet (:func:`measure_limits`, ``shaders/limits.wgsl``,
``benchmarks/machine_limits.py``): the arithmetic rate of a kernel of independent fused
multiply-adds, the bytes per second a copy kernel moves (read + written), and the cost of a dispatch
that does nothing. A stage's floor is ``max(FLOP / rate, bytes / bandwidth) + dispatches × cost``;
``ratio`` = measured / floor says how far a stage is from what this machine could do with the work
its kernels do as written (a kernel that does less work lowers both).

How work is counted (:func:`step_work`; per stage the unit and its per-unit constants below,
each counted from the kernel's expressions): an add, multiply, compare, select, min or max is one
FLOP, a fused multiply-add two, ``exp`` and ``log`` ten (a polynomial after range reduction, as
llvmpipe and GPU special-function units approximate them), a division or ``sqrt`` four. Bytes are
those a kernel reads and writes in global memory, once per access as written (workgroup memory
and registers are free). The per-pixel constants of the rasterisation stages count the branch-free
arithmetic every lane executes for a (pixel, splat) pair, whether or not the pair composites.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np

# -- per-unit work, counted from the kernels ---------------------------------------------------------
# project.wgsl, per Gaussian (SH degree 3): camera transform 15, sigmoid 12, view direction 15, SH basis
# 35 + colour 96, clamp and flags 10, EWA terms (quaternion, rotation, exp of the scales, R S, J W,
# A = J W M, Σ2D) ~190, conic, eigenvalue and radius ~40, tile rectangle ~30.
PROJECT_FLOP = 420
# project_backward.wgsl per Gaussian: SH backward (basis, 48 coefficient gradients, the direction's
# gradient through 15 coefficients) ~250, the EWA terms again ~190, conic -> Σ2D -> A -> M, T -> scale,
# rotation, quaternion and mean ~380, statistics ~20.
PROJECT_BACKWARD_FLOP = 850
# raster.wgsl splat_group, per (pixel, splat): dy 1, power 6, exp 10, α 2, tests 4, transmittance 2,
# stop and masks 5, weight 2, colour 6 (3 FMA), selects 2.
RASTER_PIXEL_FLOP = 40
# raster_backward.wgsl splat_group per visited (pixel, splat): dy 1, power 6, exp 10, α 2, tests 6,
# 1/(1-α) 5, T before 2, weight 2, c·dL/dC 5, colour sums 6, dL/dα 4, clamp mask 3, the four power
# sums 8, suffix 2.
RASTER_BACKWARD_PIXEL_FLOP = 62
# ... and per (splat, tile), per thread (16 on CPU adapters, 64 on GPUs): seven accumulators summed
# (21), combined into nine gradients (~15), three vec4 butterfly sums (~36).
RASTER_BACKWARD_THREAD_FLOP = 72
# emit.wgsl tile_hit per tile of a rectangle (evaluated by emit_count and again by emit_keys).
TILE_TEST_FLOP = 30
# adam.wgsl per parameter: moments 6, sqrt and two divisions 12, update and selects 4.
ADAM_FLOP = 22
# loss per pixel and channel: three 11-tap windows of five statistics (2 × 80), one of three d-maps
# (48), SSIM and its derivatives 35, L1 and the gradient 10; either kernel variant.
LOSS_FLOP = 300
# loss bytes per pixel and channel: loss_lines.wgsl (CPU adapters) reads x, y, then the vertical
# statistics (20 B), writes them (20 B) and the d-maps' sums (16 B), reads those and x, y again,
# writes dL/dimage: 92 B; loss.wgsl (GPUs) reads x, y twice, the d-maps once, writes both: 44 B.
LOSS_BYTES = {"lines": 92, "tiled": 44}

SPLAT_BYTES = 48          # Splat2D
GRAD2D_BYTES = 48         # 12 floats of screen-space gradients per Gaussian


@dataclass
class Limits:
    """What this adapter measured: FLOP/s of FMA chains, bytes/s (read + written) of a copy kernel,
    seconds per empty dispatch, and bytes/s of ``copy_buffer_to_buffer`` (for comparison)."""

    flops: float
    bandwidth: float
    dispatch_s: float
    copy_buffer_bandwidth: float

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Work:
    flop: float
    bytes: float
    dispatches: int
    unit: str = ""

    def floor_ms(self, limits: Limits) -> float:
        compute = self.flop / limits.flops
        memory = self.bytes / limits.bandwidth
        return 1000.0 * (max(compute, memory) + self.dispatches * limits.dispatch_s)

    def bound(self, limits: Limits) -> str:
        return "FLOP" if self.flop / limits.flops >= self.bytes / limits.bandwidth else "bytes"


def measure_limits(ctx, repeats: int = 5, copy_bytes: int = 32 << 20) -> Limits:
    """Measure :class:`Limits` on ``ctx`` (under a second on lavapipe): medians of ``repeats``
    timestamp-query timings (host timing without timestamp queries)."""
    from ..gpu.kernels import LIMITS
    from ..gpu.pool import BufferPool
    from ..gpu.profiler import StageTimer
    from ..gpu.shaders import ShaderLibrary

    # copy_vec4 fills its whole binding (arrayLength), which a sentinel tail would be part of
    pool = BufferPool(ctx, sentinels=False)
    lib = ShaderLibrary(ctx)
    mod = LIMITS.variant().module(lib)
    pool.get("limits_src", copy_bytes)
    pool.get("limits_dst", copy_bytes)
    bind = pool.bind_group(mod, 0, {"src": "limits_src", "dst": "limits_dst"})
    timer = StageTimer(ctx, pool)

    def timed(entry: str, grid, dispatches: int = 1, constants=None) -> float:
        pipe = mod.pipeline(entry, constants)
        out = []
        for _ in range(repeats + 1):
            enc = ctx.device.create_command_encoder()
            timer.reset()
            t0 = time.perf_counter()
            with timer.stage(enc, entry) as cpass:
                cpass.set_pipeline(pipe)
                cpass.set_bind_group(0, bind)
                for _ in range(dispatches):
                    cpass.dispatch_workgroups(*grid)
            timer.resolve(enc)
            ctx.queue.submit([enc.finish()])
            if timer.available:
                out.append(timer.read()[entry] / 1000.0)
            else:
                pool.read("limits_dst", 16)
                out.append(time.perf_counter() - t0)
        return statistics.median(out[1:])          # the first is a warm-up

    groups, loop = 128, 1024
    flops = groups * 64 * loop * 8 * 4 * 2 / timed("fma_chain", (groups, 1, 1), 1, {"LOOP": loop})
    vec4s = copy_bytes // 16
    rows = vec4s // 4 // 64
    grid = (min(rows, 1024), -(-rows // 1024), 1)
    bandwidth = 2 * copy_bytes / timed("copy_vec4", grid)
    dispatch_s = timed("empty", (1, 1, 1), 200) / 200

    def copies() -> float:
        enc = ctx.device.create_command_encoder()
        for _ in range(4):
            enc.copy_buffer_to_buffer(pool["limits_src"], 0, pool["limits_dst"], 0, copy_bytes)
        t0 = time.perf_counter()
        ctx.queue.submit([enc.finish()])
        pool.read("limits_dst", 16)
        return (time.perf_counter() - t0) / 4

    copy_s = statistics.median([copies() for _ in range(repeats)])
    for name in ("limits_src", "limits_dst"):
        pool.free(name)
    return Limits(flops, bandwidth, dispatch_s, 2 * copy_bytes / copy_s)


def emission_work(r, rect_tiles: int, pairs: int, tiles: int, scan: int) -> Work:
    """Emission's work in either layout (renderer.py): two walks over the depth-sorted splats
    (id, rectangle, splat) and their tile tests, then
    - the table: zeroed, counted, scanned and advanced; one id written per intersection;
    - per splat: the counts written, scanned and read; a (tile, id) pair written per intersection,
      sorted by tile (a histogram reads each key, the scatter reads and writes key and value, per
      pass) and binary-searched per tile."""
    n = r.num
    walks = 2 * n * (4 + 16 + SPLAT_BYTES)
    if not r.per_splat:
        return Work(2 * TILE_TEST_FLOP * rect_tiles, walks + 4 * tiles * r.chunks * 3 + 12 * pairs,
                    2 + scan, "tile of a rectangle")
    passes = len(r.pair_sort.passes)
    bins = sum(1 << w for _, w in r.pair_sort.passes)       # the (bin, thread) tables' rows
    sort_bytes = passes * 20 * pairs + 4 * 2 * r.pair_sort.threads * bins
    return Work(2 * TILE_TEST_FLOP * rect_tiles + 10 * passes * pairs,
                walks + 4 * n * 4 + 8 * pairs + sort_bytes + 2 * 8 * tiles * 24,
                r.dispatches_per_render - len(r.pages) - r.depth_sort.num_dispatches - 1,
                "tile of a rectangle")


def step_work(step) -> dict[str, Work]:
    """The work of each stage of ``step``'s last step (a ``GpuTrainStep``), counted with the
    constants above from what the device holds: N, SH coefficients, image size, the tile rectangles,
    the intersections and each pixel's last contributor (a few small blocking reads: call it
    outside timed regions)."""
    r = step.renderer
    n, k = r.num, r.sh_coeffs
    w, h = r.width, r.height
    px = w * h
    tiles = r.tiles_x * r.tiles_y
    pairs = min(r.intersection_count(), r.capacity)
    rects = step.pool.read_array("rects", np.uint32, 4 * n).reshape(n, 4).astype(np.int64)
    rect_tiles = int(np.sum((rects[:, 2] - rects[:, 0]) * (rects[:, 3] - rects[:, 1])))
    last = step.pool.read_array("last_contrib", np.uint32, px).astype(np.int64)
    visited = int(last.sum())           # (pixel, splat) pairs the backward pass walks
    threads = 16 * (16 // step.layout.raster_rows)
    param_floats = 11 + 3 * k
    scan = 4 if step.layout.parallel_scan else 1
    work = {
        "project": Work(PROJECT_FLOP * n, n * (4 * param_floats + SPLAT_BYTES + 4 + 16 + 8), 1,
                        "Gaussian"),
        # four 8-bit passes: a histogram reads the key, the scatter reads key and value and
        # writes both
        "depth sort": Work(4 * 10 * n, 4 * 20 * n, r.depth_sort.num_dispatches, "Gaussian"),
        "emit+scan": emission_work(r, rect_tiles, pairs, tiles, scan),
        "rasterize": Work(RASTER_PIXEL_FLOP * 256 * pairs, pairs * (4 + SPLAT_BYTES) + 20 * px, 1,
                          "(pixel, splat)"),
        "loss": Work(LOSS_FLOP * 3 * px, LOSS_BYTES[step.loss.variant] * 3 * px,
                     step.loss.dispatches, "pixel·channel"),
        # per intersection: id and splat read, nine atomic additions (read and write); per pixel
        # its transmittance, last contributor and dL/dC read
        "raster backward": Work(RASTER_BACKWARD_PIXEL_FLOP * visited
                                + RASTER_BACKWARD_THREAD_FLOP * threads * pairs,
                                pairs * (4 + SPLAT_BYTES + 9 * 8) + 20 * px, 1, "(pixel, splat)"),
        "project backward": Work(PROJECT_BACKWARD_FLOP * n,
                                 n * (8 * param_floats + SPLAT_BYTES + 2 * GRAD2D_BYTES + 24), 1,
                                 "Gaussian"),
        "adam": Work(ADAM_FLOP * n * param_floats, 32 * n * param_floats, 1, "parameter"),
    }
    if step.last_step_fused:
        # one dispatch (per page): the gradients go into the Adam update instead of a buffer; the
        # parameters are read and written, the moments read and written, no gradient moves
        pb, adam = work.pop("project backward"), work.pop("adam")
        work["project backward + adam"] = Work(
            pb.flop + adam.flop, n * (24 * param_floats + SPLAT_BYTES + 2 * GRAD2D_BYTES + 24), 1,
            "Gaussian")
    pages = len(r.pages)
    for name in ("project", "project backward", "project backward + adam", "adam"):
        if name in work and pages > 1:
            w = work[name]
            work[name] = Work(w.flop, w.bytes, w.dispatches * pages, w.unit)
    return work


def roofline(work: dict[str, Work], measured_ms: dict[str, float], limits: Limits) -> dict:
    """Per stage: FLOP, bytes, dispatches, the floor at ``limits``, the measured time, the ratio."""
    out = {}
    for name, wk in work.items():
        floor = wk.floor_ms(limits)
        ms = measured_ms.get(name)
        out[name] = {"flop": wk.flop, "bytes": wk.bytes, "dispatches": wk.dispatches,
                     "bound": wk.bound(limits), "floor_ms": floor, "measured_ms": ms,
                     "ratio": None if ms is None or floor <= 0 else ms / floor}
    return out


def format_roofline(table: dict, limits: dict, label: str = "") -> list[str]:
    lines = [f"{label} roofline at {limits['flops'] / 1e9:.1f} GFLOP/s, "
             f"{limits['bandwidth'] / 1e9:.2f} GB/s (kernel copy; copy_buffer "
             f"{limits['copy_buffer_bandwidth'] / 1e9:.1f} GB/s), "
             f"{1e6 * limits['dispatch_s']:.1f} us/dispatch:",
             f"  {'stage':<17} {'MFLOP':>9} {'MB':>8} {'disp':>5} {'bound':>6} {'floor ms':>9} "
             f"{'measured':>9} {'ratio':>6}"]
    for name, row in table.items():
        ms = row["measured_ms"]
        lines.append(f"  {name:<17} {row['flop'] / 1e6:>9.1f} {row['bytes'] / 1e6:>8.2f} "
                     f"{row['dispatches']:>5} {row['bound']:>6} {row['floor_ms']:>9.2f} "
                     f"{(ms if ms is not None else float('nan')):>9.2f} "
                     f"{(row['ratio'] if row['ratio'] is not None else float('nan')):>6.1f}")
    return lines
