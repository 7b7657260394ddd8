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
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from round_cost import alternate, finish  # noqa: E402  (beside this script)


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
        """The same decision and rank, ranked on the host (as every decision was before)."""

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

    def prepare():
        step.state.upload(a)          # the same state before each round

    def grow(decision):
        report = step.state.grow(decision, room)
        assert report.capped, report

    for decision in variants.values():      # warm-up: the pipelines compiled
        prepare()
        grow(decision)
    out = {"n": args.n, "room": room, "wanted": wanted, "adapter": ctx.name,
           **alternate(step, {k: partial(grow, d) for k, d in variants.items()}, args.pairs,
                       prepare)}
    print(f"N {args.n}, {wanted} rows' worth want to grow, room {room} ({ctx.name})")
    return finish(out, args.json)

if __name__ == "__main__":
    raise SystemExit(main())
