"""A shader against its version at another commit, side by side: training-step stage times on a
trained model and a real scene's training views (docs/benchmarks.md, "Where the rasteriser's work
goes").

    python benchmarks/shader_ab.py CHECKPOINT SCENE --shader raster --rev d5d8bc2 \
        [-r 8] [--white-background] [--pairs 3] [--steps 40]

Each measurement is a fresh process (the shader cache is per device) that loads the checkpoint's
model into a ``GpuTrainStep``, takes 5 warm-up steps over the first training views and then
``--steps`` profiled steps (timestamp queries); it prints the median device milliseconds per stage
and the median wall time of a step. The new (working tree) and old (``git show REV:…``) shaders
alternate ``--pairs`` times, new first, so that the machine's drift touches both. The rendered
image before the first step is compared bit for bit.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def worker(args) -> None:
    import wgsl_splat.gpu.shaders as shaders

    if args.old_source:
        old_text = Path(args.old_source).read_text(encoding="utf-8")
        load = shaders.load_source

        def patched(name, *a, **kw):
            if name == args.shader:
                kw["source"] = old_text
            return load(name, *a, **kw)

        shaders.load_source = patched
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.data.datasets import load_dataset
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.training.checkpoints import load_checkpoint

    model = load_checkpoint(args.checkpoint)[1].model
    bg = (1.0, 1.0, 1.0) if args.white_background else (0.0, 0.0, 0.0)
    if args.scene == "default":                 # the embedded scene, as train takes it
        from wgsl_splat.data.default_scene import default_dataset
        ds = default_dataset(resolution=int(args.resolution), eval_split=True, background=bg)
    else:
        ds = load_dataset(args.scene, resolution=args.resolution, eval_split=True, background=bg)
    views = ds.train_indices[:20]
    cams = [ds.cameras[i] for i in views]
    images = [ds.load_image(i) for i in views]
    step = GpuTrainStep(select_device(), model, OptimConfig().with_scene(1.0, 30_000),
                        background=bg)
    np.save(args.image_out, np.asarray(step.render(cams[0], 3)))
    for i in range(5):
        step.step(cams[i], images[i], 3, view_id=i)
    step.take_losses()
    step.enable_profiling(True)
    stages: dict[str, list[float]] = {}
    walls = []
    for s in range(args.steps):
        i = s % len(cams)
        t0 = time.perf_counter()
        step.step(cams[i], images[i], 3, view_id=i)
        step.take_losses()
        walls.append(1000.0 * (time.perf_counter() - t0))
        for k, v in step.stage_times().items():
            stages.setdefault(k, []).append(v)
    out = {k: statistics.median(v) for k, v in stages.items()}
    out["step wall"] = statistics.median(walls)
    print(json.dumps(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("scene")
    ap.add_argument("--shader", required=True, help="module name, e.g. raster")
    ap.add_argument("--rev", required=True, help="the commit holding the old version")
    ap.add_argument("-r", "--resolution", type=float, default=1.0)
    ap.add_argument("--white-background", action="store_true")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--old-source", help=argparse.SUPPRESS)      # worker mode
    ap.add_argument("--image-out", help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return
    tmp = Path(tempfile.mkdtemp(prefix="shader_ab_"))
    old = tmp / f"{args.shader}.wgsl"
    old.write_text(subprocess.run(
        ["git", "show", f"{args.rev}:wgsl_splat/gpu/shaders/{args.shader}.wgsl"], cwd=ROOT,
        check=True, capture_output=True, text=True).stdout, encoding="utf-8")
    common = [sys.executable, __file__, args.checkpoint, args.scene, "--shader", args.shader,
              "--rev", args.rev, "-r", str(args.resolution), "--steps", str(args.steps),
              "--worker"] + (["--white-background"] if args.white_background else [])
    runs = {}
    for label in ("new", "old"):
        extra = ["--image-out", str(tmp / f"{label}.npy")]
        if label == "old":
            extra += ["--old-source", str(old)]
        runs[label] = (common + extra, os.environ, None)
    results = alternate(runs, args.pairs)
    same = np.array_equal(np.load(tmp / "new.npy"), np.load(tmp / "old.npy"))
    print(f"image before the first step identical: {same}")
    print_side_by_side(results, 28, 1)


def alternate(runs: dict, pairs: int) -> dict[str, list[dict]]:
    """Each label's worker (argv, env, cwd) run in turn, ``pairs`` times over (a drifting machine
    skews both alike); each worker prints its figures as one JSON line, last."""
    results: dict[str, list[dict]] = {label: [] for label in runs}
    for _ in range(pairs):
        for label, (argv, env, cwd) in runs.items():
            run = subprocess.run(argv, check=True, capture_output=True, text=True, env=env,
                                 cwd=cwd)
            results[label].append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(label, {k: round(v, 2) for k, v in results[label][-1].items()}, flush=True)
    return results


def print_side_by_side(results: dict[str, list[dict]], width: int, digits: int) -> None:
    """Every figure of the new and the old runs on one line, in ms."""
    for key in results["new"][0]:
        new = " / ".join(f"{r[key]:.{digits}f}" for r in results["new"])
        old_ = " / ".join(f"{r[key]:.{digits}f}" for r in results["old"])
        print(f"  {key:{width}s} new {new}   old {old_} ms")


if __name__ == "__main__":
    main()
