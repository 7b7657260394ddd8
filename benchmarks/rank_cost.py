"""What a capped growth round's ranking costs, side by side (docs/benchmarks.md, "The room's
ranking on the device"): the fast mode's round (``FastDecision``, room a third of what wants to
grow) with its rows ranked on the device (``rank.wgsl``) and, the way the GPU path did it before,
on the host (each row's cost and every statistic read back, ``budget`` sorts, the allowed flags
uploaded), alternated ``--pairs`` times in one process on the same state.

    python benchmarks/rank_cost.py [-n 1000000] [--pairs 5] [--json F]

Prints medians (ms per round, the whole grow: decision, ranking, the new rows) and the bytes and
blocking reads per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=1_000_000)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)

    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.strategy.fast import Fast, FastDecision, FastRound
    from wgsl_splat.tools.random_scene import random_scene

    class HostRanked(FastDecision):
        """The same decision and rank, ranked on the host (a score() of its own)."""

        def score(self, stats):
            return super().score(stats)

        @property
        def ranked_on_device(self) -> bool:
            return False

    rng = np.random.default_rng(0)
    model, _ = random_scene(rng, args.n, 64, 64, sh_degree=3, edge_cases=False, dtype=np.float32)
    a = HostArrays.fresh(model, Fast.statistics)
    a.stats["grad_accum"][:] = rng.uniform(0, 1e-3, args.n)
    a.stats["denom"][:] = 1
    a.stats["fast_err_pixels"][:] = rng.uniform(0, 40, args.n)
    a.stats["fast_err"][:] = rng.uniform(0, 5, args.n)
    a.stats["fast_weight"][:] = 10
    rnd = FastRound(grad_threshold=2e-4, clone_max_scale=0.02, split_samples=2, split_scale_div=1.6,
                    min_opacity=0.0, max_world_scale=None, err_min=20.0, weight_min=0.0, key=1)
    ctx = select_device("gpu")
    step = GpuTrainStep(ctx, a, OptimConfig())
    wanted = int(np.sum(FastDecision(rnd).numpy(a, np.ones(args.n, bool)).cost))
    room = wanted // 3
    variants = {"ranked on the device": FastDecision(rnd), "ranked on the host": HostRanked(rnd)}
    times = {k: [] for k in variants}
    read, reads = {}, {}
    for _ in range(args.pairs):
        for name, decision in variants.items():
            step.state.upload(a)          # the same state before each round
            step.synchronize()
            before, waits = step.counters["readback_bytes"], step.counters["readbacks"]
            t = time.perf_counter()
            report = step.state.grow(decision, room)
            read[name] = step.counters["readback_bytes"] - before
            reads[name] = step.counters["readbacks"] - waits
            step.synchronize()
            times[name].append(time.perf_counter() - t)
            assert report.capped, report
    out = {"n": args.n, "room": room, "wanted": wanted, "adapter": ctx.name,
           "median_ms": {k: 1000 * statistics.median(v) for k, v in times.items()},
           "readback_bytes": read, "readbacks": reads}
    print(f"N {args.n}, {wanted} rows' worth want to grow, room {room} ({ctx.name})")
    for k in variants:
        print(f"{k:22s} {out['median_ms'][k]:9.1f} ms per round   {read[k]:>12,} bytes read back "
              f"in {reads[k]} blocking read(s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
