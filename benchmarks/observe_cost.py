"""What a densification round's host traffic costs, side by side (docs/benchmarks.md, "Rounds
without image read-backs"): the fast mode's observation of 10 views and the growth validation's
error of 10 withheld views, each the way the GPU path did it before (the render read back, the
map or the L1 computed with NumPy, the map uploaded) and on the device (``ErrorMaps`` through
``error_maps.wgsl``; ``TrainStep.view_errors``), alternated ``--pairs`` times in one process.

    python benchmarks/observe_cost.py [--size 800x800] [-n 200000] [--views 10] [--pairs 5]

A random scene of ``-n`` Gaussians seen by one camera; the views' images are random and resident
on the device. The host variant here is given the images as float arrays, which the training
loop converted again from the dataset's 8-bit copy (or decoded from disk beyond its budget): its
figures are a lower bound. Prints medians (ms per round), the bytes read back and the blocking
reads per round (a GPU waits idle through each).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from round_cost import alternate, finish  # noqa: E402  (beside this script)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="800x800")
    p.add_argument("-n", type=int, default=200_000)
    p.add_argument("--views", type=int, default=10)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)
    w, h = (int(x) for x in args.size.lower().split("x"))

    from wgsl_splat.contract.error_maps import ErrorMaps
    from wgsl_splat.contract.losses import l1_term
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import View
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.strategy.fast import OBSERVED_STATS, Fast
    from wgsl_splat.tools.random_scene import random_scene

    rng = np.random.default_rng(0)
    model, cam = random_scene(rng, args.n, w, h, sh_degree=3, edge_cases=False, dtype=np.float32)
    ctx = select_device("gpu")
    step = GpuTrainStep(ctx, HostArrays.fresh(model, Fast.statistics))
    images = [rng.uniform(0, 1, (h, w, 3)).astype(np.float32) for _ in range(args.views)]
    views = [View(cam, img, k) for k, img in enumerate(images)]
    maps = ErrorMaps(0.1)
    step.observe(views, maps, OBSERVED_STATS)          # warm-up: pipelines, resident images
    step.view_errors(views)
    held = [View(cam, None, k) for k in range(args.views)]

    def host_observe():
        step.observe(views, lambda img, tgt: maps(img, tgt), OBSERVED_STATS)

    def device_observe():
        step.observe(held, maps, OBSERVED_STATS)

    def host_errors():
        return [l1_term(step.render(cam), img) for img in images]

    def device_errors():
        return step.view_errors(held)

    variants = {"observe, host": host_observe, "observe, device": device_observe,
                "validation, host": host_errors, "validation, device": device_errors}
    out = {"size": [w, h], "n": args.n, "views": args.views, "adapter": ctx.name,
           **alternate(step, variants, args.pairs)}
    return finish(out, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
