"""Issue 23's proof past one binding on lavapipe (docs/benchmarks.md, "Past one binding"):

    python benchmarks/scale_proof.py double runs/big/point_cloud/iteration_300/point_cloud.ply big3m.ply
    python benchmarks/scale_proof.py train big3m.ply --steps 20 --out trained3m.ply

``double``: every Gaussian twice, each copy at the opacity a' with 1 - (1 - a')² = a (a pair
composites like the original where it overlaps exactly), the copy's mean jittered by 1e-4.
``train``: a GpuTrainStep on the model for a few steps over the embedded scene's training views
(the scene the model was trained on with ``train default``), every loss printed and required
finite, the state written back to a PLY.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.data.ply import load_ply, save_ply
from wgsl_splat.model import GaussianModel, inverse_sigmoid


def double(src: str, dst: str) -> None:
    m = load_ply(src)
    a = 1 / (1 + np.exp(-m.opacity_logits.astype(np.float64)))
    logit = inverse_sigmoid(np.clip(1 - np.sqrt(np.clip(1 - a, 0, 1)), 1e-6, 1 - 1e-6))
    logit = logit.astype(np.float32)
    jitter = np.random.default_rng(0).normal(0, 1e-4, m.means.shape).astype(np.float32)
    big = GaussianModel(np.concatenate([m.means, m.means + jitter]),
                        np.concatenate([m.log_scales] * 2), np.concatenate([m.quats] * 2),
                        np.concatenate([logit, logit]), np.concatenate([m.sh] * 2))
    save_ply(dst, big)
    print(f"{len(m)} -> {len(big)} Gaussians in {dst}")


def train(src: str, steps: int, dst: str) -> None:
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.data.default_scene import default_dataset, scene_extent
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.gpu.step import GpuTrainStep

    ds = default_dataset(eval_split=True)
    model = load_ply(src)
    step = GpuTrainStep(select_device("gpu"), HostArrays.of(model),
                        OptimConfig().with_scene(scene_extent(ds.cameras), 30000))
    print(f"N {step.num_gaussians}", flush=True)
    losses = []
    for it in range(steps):
        i = ds.train_indices[it % len(ds.train_indices)]
        t = time.perf_counter()
        step.step(ds.cameras[i], ds.load_image(i), model.sh_degree, view_id=i)
        got = step.take_losses()
        losses += got
        print(f"step {it + 1}: loss {got[0]:.5f} ({time.perf_counter() - t:.1f} s)", flush=True)
    if not np.all(np.isfinite(losses)):
        raise SystemExit(f"non-finite losses: {losses}")
    print(f"peak pool memory {step.counters['peak_bytes'] / 2**20:.0f} MiB", flush=True)
    save_ply(dst, step.state.download().model)
    print(f"saved {step.num_gaussians} Gaussians to {dst}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("double")
    d.add_argument("src")
    d.add_argument("dst")
    t = sub.add_parser("train")
    t.add_argument("src")
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--out", required=True)
    args = p.parse_args()
    if args.cmd == "double":
        double(args.src, args.dst)
    else:
        train(args.src, args.steps, args.out)


if __name__ == "__main__":
    main()
