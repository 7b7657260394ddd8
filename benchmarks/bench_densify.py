"""Densification round on the device vs through the host (the round trip the trainer used to make).

For N Gaussians of SH degree 3 with densification statistics that make about 10 % of them grow and
5 % transparent: the median time of an ADC round and of an MCMC round (relocation + 5 % growth)
done by the device state's kernels (``gpu/state.py``), against the same round done the old way
(download parameters, both Adam moments and the statistics, NumPy, upload). Each variant starts
from the same uploaded state; timings include a blocking finish.

    python benchmarks/bench_densify.py -n 100000 -n 300000 --repeats 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.gpu.runtime import select_device
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.model import GaussianModel
from wgsl_splat.reference.state import HostState
from wgsl_splat.strategy.adc import ADC_STATS, ADCRound, adc_round


def make_arrays(n: int, rng, stats=ADC_STATS) -> HostArrays:
    model = GaussianModel.random(n, rng, sh_degree=3, dtype=np.float32)
    model.log_scales[:] = rng.uniform(np.log(0.002), np.log(0.05), (n, 1))
    model.opacity_logits[rng.random(n) < 0.05] = -8.0
    a = HostArrays.fresh(model, stats)
    if stats:
        a.stats["denom"][:] = rng.integers(1, 5, n)
        grow = rng.random(n) < 0.1
        a.stats["grad_accum"][:] = a.stats["denom"] * np.where(grow, 3e-4, 5e-5)
    return a


def timed(fn, sync) -> float:
    t = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, action="append", help="Gaussians (repeatable)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ctx = select_device("gpu")
    rng = np.random.default_rng(0)
    rnd = ADCRound(2e-4, 0.01, 2, 1.6, 0.005, None, 0.0, 10**9, key=1)
    results = []
    for n in args.n or [100_000]:
        for strategy in ("adc", "mcmc"):
            arrays = make_arrays(n, rng, ADC_STATS if strategy == "adc" else ())
            step = GpuTrainStep(ctx, arrays, OptimConfig())
            state = step.state

            def sync():
                step.pool.read("counters", 4)      # a blocking read waits for the queue

            def mcmc_round(s):
                s.relocate(0.005, 3)
                s.sample_add(int(0.05 * s.n), 0.005, 4)

            def device():
                adc_round(state, rnd) if strategy == "adc" else mcmc_round(state)

            def host():
                host_state = HostState(state.download())
                adc_round(host_state, rnd) if strategy == "adc" else mcmc_round(host_state)
                state.upload(host_state.arrays)

            times = {}
            for name, fn in (("device", device), ("host round trip", host)):
                samples = []
                for _ in range(args.repeats):
                    state.upload(arrays)
                    sync()
                    samples.append(timed(fn, sync))
                times[name] = statistics.median(samples)
            n_out = state.n
            results.append(dict(n=n, strategy=strategy, n_out=n_out,
                                device_s=times["device"], host_s=times["host round trip"]))
            print(f"{strategy:4s} N {n:8d} -> {n_out:8d}: device {1000 * times['device']:8.1f} ms, "
                  f"host round trip {1000 * times['host round trip']:8.1f} ms "
                  f"({times['host round trip'] / times['device']:.1f}x)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(adapter=ctx.name, results=results), f, indent=2)


if __name__ == "__main__":
    main()
