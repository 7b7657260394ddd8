"""Forward render time: GPU pipeline (wgpu) vs the NumPy reference.

    python benchmarks/bench_forward.py [--runs 10] [--numpy-runs 10] [--scenes sfm,random] [--sort]

Configs (docs/design.md §6): 2 000 Gaussians at 135x240, 10 000 at 490x273, 20 000 at 270x480.
Scenes:
  sfm     the built-in default scene's point cloud initialised as in training (from_points: scale
          from the 3 nearest neighbours, opacity 0.1, SH degree 3), seen by its first camera;
  random  wgsl_splat.tools.random_scene (random Gaussians plus its edge cases: huge splats covering the
          whole image, opaque stacks, splats behind the camera ...): a dense worst case.
Each figure is the median of ``--runs`` renders after one warm-up render; the GPU time is a full
``render()`` with the image read back to the host (encode, one submit, wait, copy).
``--sort`` also times the intersection sort alone: the bitonic sort of the (tile, depth) keys, a
two-pass radix sort by tile, and the pipeline's own depth sort + counting-sort emission.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.gpu.renderer import GpuRenderer  # noqa: E402
from wgsl_splat.gpu.runtime import select_device  # noqa: E402
from wgsl_splat.model import GaussianModel  # noqa: E402
from wgsl_splat.reference import render as numpy_render  # noqa: E402

CONFIGS = [(2000, 135, 240), (10000, 490, 273), (20000, 270, 480)]


def make_scene(kind: str, n: int, width: int, height: int, seed: int = 0):
    if kind == "sfm":
        from wgsl_splat.data.default_scene import make_default_scene

        scene = make_default_scene(width, height, num_cameras=4, num_points=n, seed=seed)
        model = GaussianModel.from_points(scene.points, scene.colors, sh_degree=3)
        return model, scene.cameras[0]
    if kind == "random":
        from wgsl_splat.tools.random_scene import random_scene

        return random_scene(np.random.default_rng(seed), n, width, height, dtype=np.float32)
    raise ValueError(kind)


def median_time(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_sorts(ctx, renderer: GpuRenderer, runs: int) -> dict:
    """Intersection sort alone, on the keys of the last render (GPU time incl. one tiny read)."""
    from wgsl_splat.gpu.sort import BitonicSorter, RadixSorter, next_pow2

    pool, lib = renderer.pool, renderer.lib
    st = renderer.read_raster_state()
    m = len(st["isect_ids"])
    proj = renderer.read_projection()
    depth_bits = proj["depths"].astype(np.float32).view(np.uint32)[st["isect_ids"]]
    tiles = st["isect_tiles"].astype(np.uint32)
    # shuffle: the sorts must not profit from the pipeline's order
    perm = np.random.default_rng(0).permutation(m)
    keys = np.stack([tiles[perm], depth_bits[perm]], 1)
    vals = st["isect_ids"][perm].astype(np.uint32)
    out = {"intersections": m}

    def submit(encode):
        enc = ctx.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        encode(cpass)
        cpass.end()
        ctx.queue.submit([enc.finish()])
        pool.read("bench_counters", 4)

    pool.get("bench_counters", 32)
    bit = BitonicSorter(lib, pool, "bench_bitonic")
    bit.ensure_capacity(m)
    pool.get("bench_bk", 8 * bit.capacity)
    pool.get("bench_bv", 4 * bit.capacity)

    def bitonic():
        pool.write("bench_bk", keys)
        pool.write("bench_bv", vals)
        pool.write("bench_counters", np.array([m, m, max(1024, next_pow2(m)), 0], np.uint32))
        submit(lambda cp: bit.encode(cp, "bench_bk", "bench_bv", "bench_counters"))

    rad = RadixSorter(lib, pool, "bench_radix", renderer.layout)
    tiles_total = renderer.tiles_x * renderer.tiles_y
    rad.configure(m, max(1, (tiles_total - 1).bit_length()), count_slot=0)

    def radix():
        pool.write(rad.keys, keys[:, 0].copy())
        pool.write(rad.vals, vals)
        pool.write("bench_counters", np.array([m, 0, 0, 0], np.uint32))
        submit(lambda cp: rad.encode(cp, "bench_counters"))

    def upload_only():
        pool.write("bench_bk", keys)
        pool.write("bench_bv", vals)
        pool.write("bench_counters", np.array([m, m, max(1024, next_pow2(m)), 0], np.uint32))
        submit(lambda cp: None)

    base = median_time(upload_only, runs)
    out["bitonic_ms"] = 1e3 * (median_time(bitonic, runs) - base)
    out["bitonic_dispatches"] = bit.num_dispatches
    out["radix_by_tile_ms"] = 1e3 * (median_time(radix, runs) - base)
    out["radix_dispatches"] = rad.num_dispatches

    # The pipeline's way: time a render with and without stages 2-5 (depth sort + emission).
    r = renderer
    camera_args = r._bench_camera

    def render_full():
        r.render(*camera_args, readback=False)
        pool.read("counters", 4)

    original = r.encode_forward

    def encode_without_sort(cpass):
        cpass.set_pipeline(r._project.pipeline("project"))
        r._encode_project(cpass)
        r._encode_raster(cpass)

    full_ms = median_time(render_full, runs)
    r.encode_forward = encode_without_sort
    try:
        partial_ms = median_time(render_full, runs)
    finally:
        r.encode_forward = original
    out["pipeline_sort_ms"] = 1e3 * (full_ms - partial_ms)
    out["pipeline_sort_dispatches"] = r.depth_sort.num_dispatches + 3
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="timed GPU renders per config (median)")
    ap.add_argument("--numpy-runs", type=int, default=10, help="timed NumPy renders per config")
    ap.add_argument("--scenes", default="sfm,random")
    ap.add_argument("--sort", action="store_true", help="also time the intersection sorts alone")
    ap.add_argument("--adapter", default=None)
    args = ap.parse_args(argv)

    ctx = select_device("gpu", args.adapter)
    print(f"# {ctx.describe()}; Python {platform.python_version()}, NumPy {np.__version__}, "
          f"{platform.machine()}, {platform.processor() or platform.system()}")
    print(f"# median of {args.runs} GPU / {args.numpy_runs} NumPy renders after one warm-up each")
    header = (f"{'scene':<7} {'N':>6} {'W x H':>9} {'isect':>8} {'GPU ms':>8} {'NumPy ms':>9} "
              f"{'speed-up':>8}")
    print(header)
    print("-" * len(header))
    sort_rows = []
    for kind in args.scenes.split(","):
        for n, w, h in CONFIGS:
            model, cam = make_scene(kind, n, w, h)
            model32 = model.astype(np.float32)
            r = GpuRenderer(ctx)
            r.upload_model(model32)
            r._bench_camera = (cam, (0.0, 0.0, 0.0))
            gpu_s = median_time(lambda: r.render(cam, (0.0, 0.0, 0.0)), args.runs)
            model64 = model32.astype(np.float64)
            np_s = median_time(lambda: numpy_render(model64, cam, (0.0, 0.0, 0.0)), args.numpy_runs)
            print(f"{kind:<7} {n:>6} {f'{w}x{h}':>9} {r.last_count:>8} {1e3 * gpu_s:>8.1f} "
                  f"{1e3 * np_s:>9.1f} {np_s / gpu_s:>7.1f}x", flush=True)
            if args.sort:
                sort_rows.append((kind, n, w, h, time_sorts(ctx, r, args.runs)))
    if sort_rows:
        print()
        print("# intersection sort alone (ms, GPU; dispatches in brackets)")
        print(f"{'scene':<7} {'N':>6} {'W x H':>9} {'isect':>8} {'bitonic':>14} {'radix/tile':>12} "
              f"{'depth+counting':>15}")
        for kind, n, w, h, s in sort_rows:
            print(f"{kind:<7} {n:>6} {f'{w}x{h}':>9} {s['intersections']:>8} "
                  f"{s['bitonic_ms']:>9.1f} [{s['bitonic_dispatches']:>2}] "
                  f"{s['radix_by_tile_ms']:>7.1f} [{s['radix_dispatches']}] "
                  f"{s['pipeline_sort_ms']:>10.1f} [{s['pipeline_sort_dispatches']}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
