"""The data-parallel speed-up model of docs/distributed.md, as a table.

A step on G devices with one view each (global batch B = G) against one device doing the same B
views in turn:

    one device:  T1 = G·t_view + t_update
    G devices:   TG = t_view + t_update + t_copy + t_reduce
    t_copy   = 2·P / bw_host           (read the sums back, write the reduced ones: PCIe)
    t_reduce = 2·(G-1)/G · P / bw_net + 2·log2(G)·latency   (ring all-reduce; 0 for G = 1)
    P        = 248 bytes per Gaussian  (59 gradient floats at SH degree 3 + 3 statistics)

t_view (forward + backward of one view) and t_update (Adam) are inputs: ``--view-ns-per-gaussian``
and ``--view-ns-per-pixel`` give t_view = a·N + b·pixels; the defaults are placeholders to be
replaced with the lent GPU's measurement (``bench``), not measured figures.

    python benchmarks/scaling_model.py --markdown
"""

from __future__ import annotations

import argparse
import math

PAYLOAD_BYTES = 4 * (59 + 3)
LINKS = {  # name: (host link GB/s, network GB/s, latency s)
    "PCIe 4 x16, one node": (25.0, 25.0, 5e-6),
    "100 Gb/s network": (25.0, 12.5, 5e-6),
    "10 Gb/s network": (25.0, 1.25, 5e-5),
}


def step_times(g: int, n: int, pixels: int, a_ns: float, b_ns: float, adam_gbps: float,
               link: tuple[float, float, float]) -> tuple[float, float]:
    bw_host, bw_net, latency = link
    t_view = (a_ns * n + b_ns * pixels) * 1e-9
    p = PAYLOAD_BYTES * n
    t_update = 3 * 4 * 59 * n / (adam_gbps * 1e9)     # Adam reads/writes p, g, m, v
    t_copy = 2 * p / (bw_host * 1e9) if g > 1 else 0.0
    t_reduce = (2 * (g - 1) / g * p / (bw_net * 1e9) + 2 * math.log2(g) * latency) if g > 1 else 0.0
    return g * t_view + t_update, t_view + t_update + t_copy + t_reduce


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--view-ns-per-gaussian", type=float, default=10.0)
    ap.add_argument("--view-ns-per-pixel", type=float, default=10.0)
    ap.add_argument("--adam-gbps", type=float, default=1500.0)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    gs = (2, 4, 8, 16, 32, 64)
    cases = [(100_000, 800 * 800), (1_000_000, 1_000_000), (6_000_000, 1_000_000),
             (1_000_000, 4_000_000)]
    print("| link | N | pixels | " + " | ".join(f"G={g}" for g in gs) + " |")
    print("|---|---|---|" + "---|" * len(gs))
    for name, link in LINKS.items():
        for n, px in cases:
            cells = []
            for g in gs:
                t1, tg = step_times(g, n, px, args.view_ns_per_gaussian, args.view_ns_per_pixel,
                                    args.adam_gbps, link)
                cells.append(f"{t1 / tg:.1f}×")
            print(f"| {name} | {n / 1e6:g} M | {px / 1e6:g} MP | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
