"""Markdown table of a multi-scale evaluation (Mip-Splatting's protocol) of training runs.

Each run must have been evaluated with ``python -m wgsl_splat eval RUN --scales ...``; this reads
the ``eval_iteration_K[_scale_S]`` entries of every run's metrics.json and prints PSNR / SSIM per
scale side by side, with the difference of each run to the first.

    python benchmarks/multiscale_table.py plain=runs/lego_plain aa=runs/lego_aa [--iteration 7000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

KEY = re.compile(r"eval_iteration_(\d+)(?:_scale_([0-9.e+-]+))?$")


def scale_results(run_dir: str, iteration: int | None) -> tuple[int, dict[float, dict]]:
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    found: dict[int, dict[float, dict]] = {}
    for key, value in metrics.items():
        m = KEY.match(key)
        if m:
            found.setdefault(int(m.group(1)), {})[float(m.group(2) or 1.0)] = value
    if not found:
        raise SystemExit(f"{run_dir}: no eval results; run `python -m wgsl_splat eval {run_dir} --scales ...`")
    it = max(found) if iteration is None else iteration
    if it not in found:
        raise SystemExit(f"{run_dir}: no eval results at iteration {it} (has {sorted(found)})")
    return it, found[it]


def table(runs: list[tuple[str, str]], iteration: int | None) -> str:
    results = [(label, *scale_results(path, iteration)) for label, path in runs]
    scales = sorted({s for _, _, r in results for s in r}, reverse=True)
    head = "| scale | resolution | " + " | ".join(
        f"{label} PSNR / SSIM" for label, _, _ in results)
    if len(results) > 1:
        head += " | " + " | ".join(f"{label} − {results[0][0]} (dB)" for label, _, _ in results[1:])
    lines = [head + " |", "|" + "---|" * (2 + len(results) + max(0, len(results) - 1))]
    for s in scales:
        first = results[0][2].get(s)
        res = next((r[s] for _, _, r in results if s in r), {})
        size = res.get("size") or "?"
        row = [f"{s:g}", str(size)]
        for _, _, r in results:
            m = r.get(s)
            row.append(f"{m['mean']['psnr']:.2f} / {m['mean']['ssim']:.4f}" if m else "—")
        for _, _, r in results[1:]:
            m = r.get(s)
            row.append(f"{m['mean']['psnr'] - first['mean']['psnr']:+.2f}" if m and first else "—")
        lines.append("| " + " | ".join(row) + " |")
    its = ", ".join(f"{label} @ {it}" for label, it, _ in results)
    return "\n".join(lines) + f"\n\n(iterations: {its})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=RUN_DIR (the first is the baseline)")
    ap.add_argument("--iteration", type=int, default=None, help="default: each run's latest")
    args = ap.parse_args(argv)
    runs = []
    for spec in args.runs:
        label, sep, path = spec.partition("=")
        runs.append((label, path) if sep else (os.path.basename(os.path.normpath(spec)), spec))
    print(table(runs, args.iteration))
    return 0


if __name__ == "__main__":
    sys.exit(main())
