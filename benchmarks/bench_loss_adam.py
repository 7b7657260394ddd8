"""Micro-benchmark of the GPU loss (L1 + SSIM forward and dL/dimage) and the GPU Adam step.

    python benchmarks/bench_loss_adam.py [--width 490 --height 273 --gaussians 20000 --degree 3]

For each kernel it prints the median (and min) over ``--repeats`` runs after warm-up of

- ``submit+wait``: one submit holding only that stage plus a 16-byte copy that the host then maps
  (wgpu-py 0.32's ``on_submitted_work_done_sync`` fails on wgpu-native, so the map is the wait);
  the same submit without the stage is measured as ``sync baseline`` and is *not* subtracted;
- ``in-pass``: ``--batch`` copies of the stage recorded back to back in one compute pass and one
  submit, divided by the batch size (the stage's cost inside a training step's single submit);

and the NumPy reference (``reference.loss.loss_and_grad`` in float32, ``optim.adam_step``) for scale.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.contract.optim import AdamState, OptimConfig, adam_step  # noqa: E402
from wgsl_splat.gpu.adam import GpuAdam, ParamLayout  # noqa: E402
from wgsl_splat.gpu.device import Gpu  # noqa: E402
from wgsl_splat.gpu.loss import GpuLoss  # noqa: E402
from wgsl_splat.gpu.pool import BufferPool  # noqa: E402
from wgsl_splat.gpu.runtime import select_device  # noqa: E402
from wgsl_splat.gpu.shaders import ShaderLibrary  # noqa: E402
from wgsl_splat.model import GaussianModel, num_sh_coeffs  # noqa: E402
from wgsl_splat.reference.loss import loss_and_grad  # noqa: E402


def _times(fn, repeats: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=490)
    ap.add_argument("--height", type=int, default=273)
    ap.add_argument("--gaussians", type=int, default=20000)
    ap.add_argument("--degree", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10)
    args = ap.parse_args(argv)

    ctx = select_device("gpu")
    pool = BufferPool(ctx)
    lib = ShaderLibrary(ctx)
    dev, queue = ctx.device, ctx.queue
    rng = np.random.default_rng(0)
    w, h = args.width, args.height

    # -- loss ---------------------------------------------------------------------------------------
    gt = rng.uniform(0, 1, (h, w, 3)).astype(np.float32)
    img = np.clip(gt + rng.normal(0, 0.1, gt.shape), 0, 1).astype(np.float32)
    gpu = Gpu(ctx, pool, lib)
    loss = GpuLoss(gpu)
    loss.upload_target(img, "image")
    loss.upload_target(gt, "loss_target")
    loss.configure(w, h)

    import wgpu  # noqa: PLC0415

    sync_buf = dev.create_buffer(size=16, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)

    def submit_and_wait(enc) -> None:
        enc.copy_buffer_to_buffer(pool[loss.n_result], 0, sync_buf, 0, 16)
        queue.submit([enc.finish()])
        sync_buf.map_sync("READ", 0, 16)
        sync_buf.unmap()

    def run_empty() -> None:
        submit_and_wait(dev.create_command_encoder())

    def run_loss(batch: int) -> None:
        enc = dev.create_command_encoder()
        cpass = enc.begin_compute_pass()
        for i in range(batch):
            loss.encode(cpass, image="image", target="loss_target", slot=i % loss.history)
        cpass.end()
        submit_and_wait(enc)

    # -- adam ---------------------------------------------------------------------------------------
    n, k = args.gaussians, num_sh_coeffs(args.degree)
    layout = ParamLayout.flat(n, k)
    adam = GpuAdam(gpu, OptimConfig(), zero_grads=False)
    adam.configure(layout)
    pool.write("params", rng.normal(0, 1, layout.total).astype(np.float32))
    pool.write("grads", rng.normal(0, 1e-3, layout.total).astype(np.float32))

    def run_adam(batch: int) -> None:
        enc = dev.create_command_encoder()
        cpass = enc.begin_compute_pass()
        for _ in range(batch):
            adam.encode(cpass)
        cpass.end()
        submit_and_wait(enc)

    # -- NumPy references ---------------------------------------------------------------------------
    model = GaussianModel(*(rng.normal(0, 1, s).astype(np.float32)
                            for s in [(n, 3), (n, 3), (n, 4), (n,), (n, k, 3)]))
    grads = model.map(lambda a: (a * 1e-3).astype(np.float32))
    state = AdamState.zeros_for(model)
    cfg = OptimConfig()

    rows = []
    reps, wu, b = args.repeats, args.warmup, args.batch
    t0 = _times(run_empty, reps, wu)
    rows.append(("sync baseline (submit + 16-byte copy + map)", t0, [float("nan")], [float("nan")]))
    t1 = _times(lambda: run_loss(1), reps, wu)
    tb = [t / b for t in _times(lambda: run_loss(b), reps, wu)]
    tr = _times(lambda: loss_and_grad(img, gt), max(3, reps // 3), 1)
    rows.append((f"loss {w}x{h} (2 dispatches)", t1, tb, tr))
    t1 = _times(lambda: run_adam(1), reps, wu)
    tb = [t / b for t in _times(lambda: run_adam(b), reps, wu)]
    tr = _times(lambda: adam_step(model, grads, state, cfg), max(3, reps // 3), 1)
    rows.append((f"adam N={n} deg {args.degree} ({layout.total} floats, 1 dispatch)", t1, tb, tr))

    print(f"device: {ctx.describe()}; median (min) of {reps} after {wu} warm-up; in-pass = batch of "
          f"{b} in one submit / {b}")
    print(f"{'stage':<52} {'submit+wait ms':>16} {'in-pass ms':>14} {'NumPy ms':>12}")
    for name, a, bb, r in rows:
        def fmt(t):
            return f"{statistics.median(t) * 1e3:7.2f} ({min(t) * 1e3:.2f})"
        print(f"{name:<52} {fmt(a):>16} {fmt(bb):>14} {statistics.median(r) * 1e3:12.1f}")
    print(f"per-step dispatches: loss {loss.dispatches}, adam {GpuAdam.DISPATCHES}")


if __name__ == "__main__":
    main()
