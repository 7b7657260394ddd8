"""The limits the roofline of ``bench`` is set against, measured on this machine's adapter.

    python benchmarks/machine_limits.py [--json limits.json] [--repeats 7]

Prints the arithmetic rate of a kernel of independent fused multiply-adds (GFLOP/s), the bytes per
second (read + written) a copy kernel moves and those of ``copy_buffer_to_buffer`` (the driver's
memcpy), and the device time of a dispatch that does nothing, each the median of ``--repeats``
timestamp-query timings. The kernels are ``shaders/limits.wgsl``; ``bench`` measures the same at the
start of every run so that its roofline and its stage times come from the same machine state.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.gpu.runtime import select_device  # noqa: E402
from wgsl_splat.tools.bench import machine_info  # noqa: E402
from wgsl_splat.tools.roofline import measure_limits  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="also write the figures here")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    ctx = select_device("gpu")
    lim = measure_limits(ctx, repeats=args.repeats)
    print(f"{ctx.name} ({ctx.adapter_type}, {ctx.backend})")
    print(f"FMA rate:              {lim.flops / 1e9:8.2f} GFLOP/s")
    print(f"copy kernel:           {lim.bandwidth / 1e9:8.2f} GB/s (read + written)")
    print(f"copy_buffer_to_buffer: {lim.copy_buffer_bandwidth / 1e9:8.2f} GB/s (read + written)")
    print(f"empty dispatch:        {1e6 * lim.dispatch_s:8.2f} us")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(ctx), "limits": lim.as_dict()},
                                              indent=1))


if __name__ == "__main__":
    main()
