"""The per-view kernels (--appearance, --pose-opt) against another commit's, side by side: the
device milliseconds of their stages and the wall time of a step with both on (docs/benchmarks.md).

    python benchmarks/per_view_ab.py --rev 7b42ae2 [-n 20000] [--size 480x270] [--pairs 3] \
        [--layout cpu|gpu]

Their host code changes with their shaders (dispatch shapes, buffer sizes), so the old side is the
whole package at ``--rev`` (``git archive``), not one shader. Each measurement is a fresh process:
a random model, 5 warm-up steps over 3 views, then ``--steps`` profiled steps (timestamp queries);
medians. New and old alternate ``--pairs`` times, new first, so the machine's drift touches both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("appearance", "appearance backward", "pose update")


def worker(args) -> None:
    import numpy as np

    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.gpu.layout import Layout
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.tools.random_scene import random_scene

    w, h = (int(x) for x in args.size.split("x"))
    rng = np.random.default_rng(0)
    model, cam = random_scene(rng, n=args.n, width=w, height=h, sh_degree=3, dtype=np.float32)
    target = rng.uniform(0, 1, (h, w, 3)).astype(np.float32)
    ctx = select_device()
    step = GpuTrainStep(ctx, model, spec=StepSpec(
        OptimConfig().with_scene(1.5), appearance_views=3, pose_views=3),
        layout=Layout.of(ctx, args.layout))
    for i in range(5):
        step.step(cam, target, 0, view_id=i % 3)
    step.take_losses()
    step.enable_profiling(True)
    stages: dict[str, list[float]] = {}
    walls = []
    for s in range(args.steps):
        t0 = time.perf_counter()
        step.step(cam, target, 0, view_id=s % 3)
        step.take_losses()
        walls.append(1000.0 * (time.perf_counter() - t0))
        for k, v in step.stage_times().items():
            stages.setdefault(k, []).append(v)
    out = {k: statistics.median(stages[k]) for k in STAGES}
    out["all stages"] = statistics.median([sum(v[i] for v in stages.values())
                                           for i in range(args.steps)])
    out["step wall"] = statistics.median(walls)
    print(json.dumps(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True, help="the commit holding the old version")
    ap.add_argument("-n", type=int, default=20000, help="Gaussians")
    ap.add_argument("--size", default="480x270", help="WIDTHxHEIGHT")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layout", choices=("cpu", "gpu"), help="a kind's layout (default: the "
                    "adapter's)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return
    # this folder's shader_ab (the scripts run from it)
    from shader_ab import alternate, print_side_by_side

    old = Path(tempfile.mkdtemp(prefix="per_view_ab_"))
    archive = subprocess.run(["git", "archive", args.rev, "wgsl_splat"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    common = [sys.executable, __file__, "--worker", "--rev", args.rev, "-n", str(args.n),
              "--size", args.size, "--steps", str(args.steps)] + (
                  ["--layout", args.layout] if args.layout else [])
    runs = {label: (common, dict(os.environ, PYTHONPATH=str(path)), path)
            for label, path in (("new", ROOT), ("old", old))}
    print_side_by_side(alternate(runs, args.pairs), 20, 2)

if __name__ == "__main__":
    main()
