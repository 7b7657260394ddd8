"""``python -m wgsl_splat bench``: training-step and forward-render timings on the GPU and NumPy paths.

Scene: the embedded default scene at W×H with N points on its surfaces, initialised as training
initialises an SfM point cloud (``GaussianModel.from_points``: kNN scales, opacity 0.1, SH degree
3), and its ray-cast image of the first camera as the target: one real training step at its start.

Per configuration and path:

- ``step``: wall time of one full step (forward, loss, backward, Adam) including the wait for its
  completion, median and spread (min, max) of ``steps`` timed steps after ``warmup`` steps;
- ``pipelined``: steps submitted back to back with one sync at the end, per step (what training
  sees, since it syncs once per batch of steps);
- ``host``: the host-side share of a GPU step (Python, encoding, submit; not the time ``submit``
  blocks on the device), i.e. the overhead an Amdahl view sets against the device time;
- ``stages``: device milliseconds per stage from timestamp queries (medians over profiled steps);
  on the NumPy path, or without timestamp queries, fenced host timing per stage;
- ``forward``: a forward render alone with the image read back;
- ``peak_bytes``: peak device memory of the buffer pool, and per Gaussian; ``memory``: every
  buffer the pool held at that peak (name, bytes), the report of memory per buffer;
- ``roofline``: per stage the work its kernels do (FLOP, bytes, dispatches; :mod:`.roofline`), the
  time that work takes at the adapter's measured limits (``limits`` of the report: FMA rate, a copy
  kernel's bandwidth, the cost of an empty dispatch), the measured stage time and their ratio.
"""

from __future__ import annotations

import datetime
import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np

BENCH_SCENES = {
    "small": (2_000, 135, 240),      # docs/design.md §6: multi-view smoke (M8)
    "medium": (10_000, 490, 273),    # multi-view, T&T train
    "large": (20_000, 270, 480),     # single image (M7)
    "huge": (200_000, 1920, 1080),   # GPU only
    "mem": (500_000, 1280, 800),     # issue 23's memory target: 500k Gaussians at ~1 MP
    "1m": (1_000_000, 1920, 1080),   # GPU only: the step at real-capture scale
    "3m": (3_000_000, 1920, 1080),   # GPU only; past one 128 MiB binding of parameters
}
#: above this many points the scene's initial scales come from a sample's k-NN distances (the
#: exact k-NN of millions of points takes minutes on one core; a timing benchmark needs neither)
KNN_EXACT_MAX = 500_000
SEED_SCENES = ("small", "medium", "large")
ALL_SCENES = SEED_SCENES + ("huge",)        # --preset all (mem, 1m, 3m are named explicitly)
#: the predecessor's Apple M2 Max GPU seconds per iteration (docs/design.md §6)
PREDECESSOR_GPU_S = {"small": 0.215, "medium": 3.1, "large": 5.65}


@dataclass
class Config:
    name: str
    n: int
    width: int
    height: int


def make_scene(n: int, width: int, height: int, seed: int = 0):
    """(model, camera, target image, scene extent) of the benchmark scene."""
    from ..data.default_scene import make_default_scene
    from ..model import GaussianModel

    scene = make_default_scene(width, height, num_cameras=2, num_points=n, seed=seed)
    if n <= KNN_EXACT_MAX:
        model = GaussianModel.from_points(scene.points, scene.colors, sh_degree=3)
    else:
        # the scale of a sample's median k-NN distance, scaled to the full density (the points lie
        # on surfaces: squared spacing ∝ 1/n)
        from ..model import (
            inverse_sigmoid,
            knn_mean_sq_dist,
            num_sh_coeffs,
            rgb_to_sh_dc,
        )

        rng = np.random.default_rng(seed)
        sample = rng.choice(n, KNN_EXACT_MAX // 5, replace=False)
        d2 = float(np.median(knn_mean_sq_dist(scene.points[sample], k=3))) * len(sample) / n
        sh = np.zeros((n, num_sh_coeffs(3), 3), np.float32)
        sh[:, 0] = rgb_to_sh_dc(np.asarray(scene.colors, np.float64))
        quats = np.zeros((n, 4), np.float32)
        quats[:, 0] = 1.0
        model = GaussianModel(np.asarray(scene.points, np.float32),
                              np.full((n, 3), 0.5 * np.log(max(d2, 1e-14)), np.float32), quats,
                              np.full(n, inverse_sigmoid(0.1), np.float32), sh)
    centres = np.stack([c.center for c in scene.cameras])
    extent = 1.1 * float(np.linalg.norm(centres - centres.mean(0), axis=1).max())
    return model, scene.cameras[0], np.ascontiguousarray(scene.images[0], np.float32), extent


def _summary(times: list[float]) -> dict:
    ms = [1000.0 * t for t in times]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "runs": len(ms)}


def bench_gpu(ctx, cfg: Config, steps: int, warmup: int, stages: bool = True,
              modes: tuple[str, ...] = ("classic",), limits=None,
              layouts: tuple = (None,)) -> dict[tuple, dict]:
    """Per (render mode, layout kind), the GPU figures of the module docstring; a layout kind
    (``Layout.of``'s: "cpu", "gpu", None for the adapter's own) runs that kind's layout on this
    adapter. With several runs the timed loops alternate between them step by step, so a machine
    whose speed drifts (a shared VM) skews every run alike and their ratio stays meaningful."""
    from ..contract.optim import OptimConfig
    from ..gpu.layout import Layout
    from ..gpu.step import GpuTrainStep
    from ..render_config import render_config
    from .roofline import roofline, step_work

    model, cam, target, extent = make_scene(cfg.n, cfg.width, cfg.height)
    runs = {(m, k): GpuTrainStep(ctx, model, OptimConfig().with_scene(extent, 30_000),
                                 render_config=render_config(m), layout=Layout.of(ctx, k))
            for m in modes for k in layouts}
    out: dict[tuple, dict] = {key: {} for key in runs}
    for m, step in runs.items():
        if step.render_config.antialiased:   # the 3D filter of the scene's view (not in a step)
            step.set_filter_cameras([cam])
            step.update_filter_3d()
            t0 = time.perf_counter()
            step.update_filter_3d()
            step.filter_3d()
            out[m]["filter3d_ms"] = 1000.0 * (time.perf_counter() - t0)
        for _ in range(warmup):
            step.step(cam, target, 3, view_id=0)
        step.take_losses()
    wall = {m: [] for m in runs}
    host = {m: [] for m in runs}
    pipelined = {m: 0.0 for m in runs}
    for _ in range(steps):
        for m, step in runs.items():
            t0 = time.perf_counter()
            blocked0 = step.blocked_seconds
            step.step(cam, target, 3, view_id=0)
            t1 = time.perf_counter()
            host[m].append((t1 - t0) - (step.blocked_seconds - blocked0))
            step.take_losses()
            wall[m].append(time.perf_counter() - t0)
    block = 5
    for _ in range(-(-steps // block)):
        for m, step in runs.items():
            t0 = time.perf_counter()
            for _ in range(block):
                step.step(cam, target, 3, view_id=0)
            step.take_losses()
            pipelined[m] += time.perf_counter() - t0
    for m, step in runs.items():
        out[m].update({"step": _summary(wall[m]),
                       "pipelined_ms": 1000.0 * pipelined[m] / (block * -(-steps // block)),
                       "host": _summary(host[m]), "intersections": step.max_intersections,
                       "overflowed_steps": step.overflowed_steps,
                       "layout_choices": {
                           "emission": step.layout.emission,
                           "threads_per_tile": 256 // step.layout.raster_rows
                           // step.layout.raster_cols,
                           "parallel_scan": step.layout.parallel_scan},
                       "emission_threads": step.renderer.emission_threads,
                       "splats_per_emission_thread": cfg.n / max(step.renderer.emission_threads, 1)})
        stage_ms: dict[str, list[float]] = {}
        if stages and step.enable_profiling(True):
            for _ in range(max(3, min(steps, 7))):
                step.step(cam, target, 3, view_id=0)
                step.take_losses()
                for k, v in step.stage_times().items():
                    stage_ms.setdefault(k, []).append(v)
            step.enable_profiling(False)
            out[m]["stages_source"] = "timestamp queries"
        elif stages:
            # e.g. the webgpu device profile (WGSL_SPLAT_DEVICE_PROFILE), or an adapter without
            # the feature: said in the report instead of failing
            out[m]["stages_unavailable"] = (
                f"no timestamp-query on this device, device profile {ctx.profile_name}")
        out[m]["stages"] = {k: statistics.median(v) for k, v in stage_ms.items()}
        if limits is not None and out[m]["stages"]:
            out[m]["roofline"] = roofline(step_work(step), out[m]["stages"], limits)
        fwd = []
        step.render(cam, 3)
        for _ in range(steps):
            t0 = time.perf_counter()
            step.render(cam, 3)
            fwd.append(time.perf_counter() - t0)
        out[m]["forward"] = _summary(fwd)
        peak = step.counters["peak_bytes"]
        out[m]["peak_bytes"] = peak
        out[m]["bytes_per_gaussian"] = peak / cfg.n
        out[m]["memory"] = step.pool.report()
    return out


def bench_cpu(cfg: Config, steps: int, warmup: int, mode: str = "classic") -> dict:
    """The NumPy path with fenced host timing per stage (the same calls as CpuTrainStep.step)."""
    from ..contract.optim import AdamState, OptimConfig, adam_step
    from ..reference import compute_filter_3d, loss_and_grad, render, render_backward
    from ..render_config import render_config

    model, cam, target, extent = make_scene(cfg.n, cfg.width, cfg.height)
    model = model.astype(np.float32)
    rc = render_config(mode)
    mode_args = dict(config=rc)
    if rc.antialiased:
        mode_args["filter_3d"] = compute_filter_3d(model.means, [cam], rc).astype(np.float32)
    config = OptimConfig().with_scene(extent, 30_000)
    adam = AdamState.zeros_for(model)
    stage_ms: dict[str, list[float]] = {}
    wall = []
    for i in range(warmup + steps):
        t = [time.perf_counter()]
        out = render(model, cam, active_sh_degree=3, **mode_args)
        t.append(time.perf_counter())
        _, dimg, _ = loss_and_grad(out.image, target)
        t.append(time.perf_counter())
        grads = render_backward(model, cam, out, dimg)
        t.append(time.perf_counter())
        adam_step(model, grads.params, adam, config)
        t.append(time.perf_counter())
        if i >= warmup:
            wall.append(t[-1] - t[0])
            for name, a, b in zip(("forward", "loss", "backward", "adam"), t, t[1:]):
                stage_ms.setdefault(name, []).append(1000.0 * (b - a))
    fwd = []
    for _ in range(max(1, min(steps, 5))):
        t0 = time.perf_counter()
        render(model, cam, active_sh_degree=3, **mode_args)
        fwd.append(time.perf_counter() - t0)
    return {"step": _summary(wall), "stages": {k: statistics.median(v) for k, v in stage_ms.items()},
            "stages_source": "host timing", "forward": _summary(fwd)}


def machine_info(ctx=None) -> dict:
    info = {"date": datetime.date.today().isoformat(), "platform": platform.platform(),
            "machine": platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__, "cpu": _cpu_name()}
    if ctx is not None:
        import wgpu

        info.update(adapter=ctx.name, adapter_type=ctx.adapter_type, backend=ctx.backend,
                    driver=str(ctx.info.get("description", "")), wgpu=wgpu.__version__,
                    features=ctx.feature_summary(), device_profile=ctx.profile_name)
    return info


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def format_report(report: dict) -> str:
    from .roofline import format_roofline

    lines = []
    m = report["machine"]
    lines.append(f"# {m.get('adapter', 'no GPU')} ({m.get('adapter_type', '-')}, {m.get('backend', '-')}); "
                 f"{m['cpu']}; Python {m['python']}, NumPy {m['numpy']}; {m['date']}")
    head = (f"{'config':<8} {'N':>7} {'W x H':>10} {'path':<4} {'step ms':>9} {'(min-max)':>15} "
            f"{'pipel.':>8} {'host ms':>8} {'fwd ms':>8} {'MiB':>6} {'B/G':>6}")
    lines += [head, "-" * len(head)]
    for r in report["results"]:
        for path in ("gpu", "cpu"):
            if path not in r:
                continue
            x = r[path]
            s = x["step"]
            gpu = path == "gpu"
            lines.append(
                f"{_label(r):<8} {r['n']:>7} {r['width']:>4} x {r['height']:<4} {path:<4} "
                f"{s['median_ms']:>9.1f} {s['min_ms']:>7.1f}-{s['max_ms']:<7.1f} "
                f"{(x['pipelined_ms'] if gpu else s['median_ms']):>8.1f} "
                f"{(x['host']['median_ms'] if gpu else s['median_ms']):>8.2f} "
                f"{x['forward']['median_ms']:>8.1f} "
                f"{(x['peak_bytes'] / 2**20 if gpu else float('nan')):>6.1f} "
                f"{(x['bytes_per_gaussian'] if gpu else float('nan')):>6.0f}")
    lines.append("")
    classic = {(r["config"], r.get("layout"), path): r[path]["step"]["median_ms"]
               for r in report["results"] for path in ("gpu", "cpu")
               if path in r and r.get("mode", "classic") == "classic"}
    for r in report["results"]:
        for path in ("gpu", "cpu"):
            base = classic.get((r["config"], r.get("layout"), path))
            if r.get("mode", "classic") != "classic" and path in r and base:
                ratio = r[path]["step"]["median_ms"] / base
                extra = (f"; recomputing the 3D filter {r[path]['filter3d_ms']:.1f} ms"
                         if "filter3d_ms" in r[path] else "")
                lines.append(f"{r['config']} {path}: {r['mode']} step {100 * (ratio - 1):+.1f}% "
                             f"vs classic{extra}")
    for r in report["results"]:
        if "gpu" in r and "emission_threads" in r["gpu"]:
            g = r["gpu"]
            c = g["layout_choices"]
            lines.append(f"{_label(r)} gpu layout: {c['threads_per_tile']} threads per tile, "
                         f"{'parallel' if c['parallel_scan'] else 'one-workgroup'} scans, "
                         f"emission by {c['emission']}: {g['emission_threads']} threads, "
                         f"{g['splats_per_emission_thread']:.1f} splats per thread, "
                         f"{g['intersections']} intersections")
    for r in report["results"]:
        if "gpu" in r and r["gpu"].get("memory"):
            lines += format_memory(r["gpu"], r["n"], _label(r))
    for r in report["results"]:
        for path in ("gpu", "cpu"):
            if path in r and r[path].get("stages"):
                st = r[path]["stages"]
                total = sum(st.values())
                parts = ", ".join(f"{k} {v:.2f} ({100 * v / total:.0f}%)" for k, v in st.items())
                lines.append(f"{_label(r)} {path} stages ms [{r[path]['stages_source']}]: {parts}")
            elif path in r and r[path].get("stages_unavailable"):
                lines.append(f"{_label(r)} {path} stages: not timed ({r[path]['stages_unavailable']}); "
                             f"the step and forward times above are host-timed")
        if "gpu" in r:
            g = r["gpu"]
            dev = sum(g.get("stages", {}).values())
            host = g["host"]["median_ms"]
            if dev:
                lines.append(f"{r['config']} gpu Amdahl: device {dev:.2f} ms + host {host:.2f} ms per step "
                             f"-> host share {100 * host / (dev + host):.1f}%")
        if "gpu" in r and r["gpu"].get("roofline") and report.get("limits"):
            lines += format_roofline(r["gpu"]["roofline"], report["limits"], _label(r))
        if "gpu" in r and "cpu" in r:
            ratio = r["cpu"]["step"]["median_ms"] / r["gpu"]["step"]["median_ms"]
            lines.append(f"{r['config']} GPU step is {ratio:.1f}x faster than the NumPy step")
        if "gpu" in r and r["config"] in PREDECESSOR_GPU_S:
            ref = 1000 * PREDECESSOR_GPU_S[r["config"]]
            lines.append(f"{r['config']} vs predecessor's M2 Max GPU {ref:.0f} ms/iter: "
                         f"{ref / r['gpu']['step']['median_ms']:.1f}x faster")
    return "\n".join(lines)


def format_memory(g: dict, n: int, label: str, top: int = 14) -> list[str]:
    """The pool's buffers at its peak, largest first, bytes per Gaussian each (pages of one array
    summed: ``params`` is ``params`` and ``params@1`` ...)."""
    merged: dict[str, int] = {}
    for name, size in g["memory"]:
        merged[name.split("@")[0]] = merged.get(name.split("@")[0], 0) + size
    rows = sorted(merged.items(), key=lambda kv: -kv[1])
    lines = [(f"{label} memory at the peak: {g['peak_bytes'] / 2**20:.1f} MiB = "
              f"{g['peak_bytes'] / n:.0f} bytes per Gaussian; per buffer (MiB, bytes/Gaussian):")]
    shown = rows[:top]
    rest = sum(size for _, size in rows[top:])
    width = max([24] + [len(name) for name, _ in shown])
    lines += [f"  {name:<{width}} {size / 2**20:>9.2f} {size / n:>8.1f}" for name, size in shown]
    if rest:
        lines.append(f"  {f'({len(rows) - top} others)':<{width}} {rest / 2**20:>9.2f} "
                     f"{rest / n:>8.1f}")
    return lines


def _label(r: dict) -> str:
    kind = r.get("layout")
    return (r["config"] + ("" if r.get("mode", "classic") == "classic" else "/aa")
            + (f"/{kind}-layout" if kind else ""))


def run_bench(configs: list[Config], devices: tuple[str, ...], steps: int, warmup: int, ctx=None,
              stages: bool = True, echo=print, modes: tuple[str, ...] = ("classic",),
              layouts: tuple = (None,)) -> dict:
    """Each configuration in each render mode and GPU layout kind (``layouts``: "cpu", "gpu",
    None for the adapter's), one after the other (side by side in time, so the ratios are not
    skewed by a machine whose speed drifts)."""
    report = {"machine": machine_info(ctx), "steps": steps, "warmup": warmup, "results": []}
    limits = None
    if "gpu" in devices and ctx is not None and stages:
        from .roofline import measure_limits

        echo("measuring the adapter's limits (FMA rate, copy bandwidth, dispatch cost) ...")
        limits = measure_limits(ctx)
        report["limits"] = limits.as_dict()
    for cfg in configs:
        gpu = "gpu" in devices and ctx is not None
        keys = [(m, k) for m in modes for k in (layouts if gpu else (None,))]
        results = {key: {"config": cfg.name, "n": cfg.n, "width": cfg.width,
                         "height": cfg.height, "mode": key[0], "layout": key[1]} for key in keys}
        if gpu:
            kinds = ", ".join(k or "the adapter's" for k in layouts)
            echo(f"{cfg.name}: GPU step ({', '.join(modes)}; layout {kinds}), N={cfg.n} "
                 f"{cfg.width}x{cfg.height} ...")
            for key, g in bench_gpu(ctx, cfg, steps, warmup, stages, modes, limits,
                                    layouts).items():
                results[key]["gpu"] = g
        if "cpu" in devices and cfg.n <= 50_000:
            for m in modes:
                echo(f"{cfg.name}: NumPy step ({m}), N={cfg.n} {cfg.width}x{cfg.height} ...")
                results[(m, keys[0][1])]["cpu"] = bench_cpu(cfg, steps, warmup=1, mode=m)
        for r in results.values():
            report["results"].append(r)
            for path in ("gpu", "cpu"):    # a line per result as it comes (long runs may be cut off)
                if path in r:
                    echo(f"  {_label(r)} {path}: step {r[path]['step']['median_ms']:.2f} ms median "
                         f"(min {r[path]['step']['min_ms']:.2f}, max {r[path]['step']['max_ms']:.2f})")
    return report
