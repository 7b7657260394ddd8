"""The training-step API in twenty lines: fit Gaussians to one view of the embedded scene.

    python examples/step_api.py [--steps 300] [--device auto|gpu|cpu] [--out fit.ply]

The same ``TrainStep`` interface runs on the device (``GpuTrainStep``) or on the NumPy reference
(``CpuTrainStep``); the trainer (``wgsl_splat.training.trainer``) adds datasets, schedules, densification,
evaluation and checkpoints around exactly these calls.
"""

from __future__ import annotations

import argparse

from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.data.default_scene import make_default_scene
from wgsl_splat.data.ply import save_ply
from wgsl_splat.gpu.runtime import select_device
from wgsl_splat.model import GaussianModel
from wgsl_splat.reference.step import CpuTrainStep


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
    ap.add_argument("--out", default="fit.ply")
    args = ap.parse_args(argv)

    scene = make_default_scene(args.size, args.size, num_cameras=2, num_points=1500)
    model = GaussianModel.from_points(scene.points, scene.colors, sh_degree=1)
    camera, target = scene.cameras[0], scene.images[0]
    config = OptimConfig().with_scene(extent=2.0, max_steps=args.steps)

    ctx = select_device(args.device, echo=print)
    if ctx is not None:
        from wgsl_splat.gpu.step import GpuTrainStep

        step = GpuTrainStep(ctx, model, config)
    else:
        step = CpuTrainStep(model, config)
    for _ in range(args.steps):
        step.step(camera, target, view_id=0)        # one submit per step on the GPU path
    losses = step.take_losses()                     # one read-back for all of them
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps")
    save_ply(args.out, step.get_model())
    print(f"model written to {args.out}")
    return losses[-1] / losses[0]


if __name__ == "__main__":
    main()
