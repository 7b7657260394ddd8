"""Data-parallel step: one device with a batch of B views against G devices sharing it.

For each N (SH degree 3, ADC statistics, 256 x 256 views of the bench scene): the median time per
step of a single device's batch of B views and of a ReplicatedStep over G devices (B/G views
each), the replicated step split into device time (waiting for the replicas), host read-back +
upload of the gradient sums and statistics, and the all-reduce (here in-process: the sum on the
host), with the bytes each replica moves per step. On one adapter the devices share its compute
(lavapipe: the same 2 CPU cores), so the speed-up is not the point here: the terms are, and they
feed the scaling model in docs/distributed.md.

    python benchmarks/bench_parallel.py -n 20000 -n 100000 --devices 0,0 --batch 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import ADC_STATS, HostArrays
from wgsl_splat.contract.step import View
from wgsl_splat.gpu.runtime import device_indices, open_devices
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.tools.bench import machine_info, make_scene
from wgsl_splat.training.parallel import ReplicatedStep


def timed(step, views, steps: int) -> list[float]:
    out = []
    for _ in range(steps):
        t = time.perf_counter()
        step.step_batch(views, 3)
        step.synchronize()
        out.append(time.perf_counter() - t)
    step.take_losses()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, action="append", help="Gaussians (repeatable)")
    ap.add_argument("--devices", default="0,0", help="adapter indices of the replicas")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    contexts = open_devices(device_indices(args.devices))
    report = {"machine": machine_info(contexts[0]), "devices": args.devices, "batch": args.batch,
              "results": []}
    for n in args.n or [20_000]:
        model, cam, target, extent = make_scene(n, args.size, args.size)
        config = OptimConfig().with_scene(extent, 30_000).for_batch(args.batch)
        views = [View(cam, target, 0)] * args.batch
        arrays = HostArrays.fresh(model, ADC_STATS)
        single = GpuTrainStep(contexts[0], arrays, config)
        timed(single, views, 2)
        one = timed(single, views, args.steps)
        del single
        rep = ReplicatedStep([GpuTrainStep(c, arrays, config) for c in contexts], check_every=0)
        timed(rep, views, 2)
        for k in rep.exchange_seconds:
            rep.exchange_seconds[k] = 0.0
        blocked0 = rep.blocked_seconds
        many = timed(rep, views, args.steps)
        sums, maxima = rep.replicas[0].read_reduction()
        per_step = {k: 1000 * v / args.steps for k, v in rep.exchange_seconds.items()}
        per_step["device wait"] = 1000 * (rep.blocked_seconds - blocked0) / args.steps
        row = {"n": n, "single_ms": 1000 * statistics.median(one),
               "replicated_ms": 1000 * statistics.median(many), "split_ms": per_step,
               "bytes_per_replica": int(sums.nbytes + maxima.nbytes)}
        row["readback_upload_GBps"] = (2 * row["bytes_per_replica"] * len(contexts)
                                       / (per_step["host read-back/upload"] / 1000) / 1e9)
        report["results"].append(row)
        print(f"N {n}: single device, batch {args.batch}: {row['single_ms']:.1f} ms; "
              f"{len(contexts)} devices: {row['replicated_ms']:.1f} ms = "
              + ", ".join(f"{k} {v:.1f}" for k, v in per_step.items())
              + f"; {row['bytes_per_replica'] / 2**20:.1f} MiB each way per replica "
              f"({row['readback_upload_GBps']:.2f} GB/s)")
        del rep
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
