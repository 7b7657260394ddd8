"""Emission's time per intersection as the resolution rises, at the same N (issue 33 item 7).

    python benchmarks/emission_scaling.py [-n 50000] [--layout gpu|cpu] [--reps 5]
        [--sizes 1920x1080,3840x2160]

``bench``'s scene (tools/bench.make_scene) at each size, one renderer per size in the chosen
layout kind; the forward stages are timed with timestamp queries, the sizes alternating rep by rep
(a drifting machine skews them alike). Prints the emit+scan stage's median, the intersections, the
emission threads and the µs per intersection, and each size's ratio to the first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.gpu.layout import Layout  # noqa: E402
from wgsl_splat.gpu.profiler import StageTimer  # noqa: E402
from wgsl_splat.gpu.renderer import GpuRenderer  # noqa: E402
from wgsl_splat.gpu.runtime import select_device  # noqa: E402
from wgsl_splat.tools.bench import make_scene  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=50_000)
    ap.add_argument("--layout", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="1920x1080,3840x2160")
    args = ap.parse_args()
    ctx = select_device("gpu")
    if not ctx.has_timestamps:
        sys.exit(f"{ctx.name} has no timestamp queries")
    runs = {}
    for size in args.sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        model, cam, _target, _extent = make_scene(args.n, w, h)
        r = GpuRenderer(ctx, layout=Layout.of(ctx, args.layout))
        r.upload_model(model)
        r.render(cam)                     # sizes the intersection buffers
        runs[size] = (r, cam, StageTimer(ctx, r.pool), [])
    for _ in range(args.reps):
        for r, cam, timer, times in runs.values():
            r.prepare(cam, (0.0, 0.0, 0.0), None)
            timer.reset()
            enc = ctx.device.create_command_encoder()
            for name, encode in r.forward_stages():
                with timer.stage(enc, name) as cpass:
                    encode(cpass)
            timer.resolve(enc)
            ctx.queue.submit([enc.finish()])
            times.append(timer.read()["emit+scan"])
    first = None
    print(f"{ctx.name}, {args.layout} layout ({runs[next(iter(runs))][0].layout.emission} "
          f"emission), N {args.n}, median of {args.reps}")
    for size, (r, _cam, _timer, times) in runs.items():
        ms = statistics.median(times)
        us = 1000.0 * ms / max(r.last_count, 1)
        first = first or us
        print(f"{size}: emit+scan {ms:.1f} ms, {r.last_count} intersections, "
              f"{r.emission_threads} threads, {us:.2f} us per intersection ({us / first:.2f}x)")


if __name__ == "__main__":
    main()
