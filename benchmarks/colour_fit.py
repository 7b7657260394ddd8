"""A run's held-out curve under the colour-fitted protocol, from the renders it saved.

    python benchmarks/colour_fit.py RUN_DIR [RUN_DIR ...] [--json FILE] [--plot FILE.png]

Every evaluation of a run saves its 8-bit renders (``RUN/test/iteration_K/``), exactly the images
it scored. This scores each one again three ways, nothing rendered or trained: the whole view as
the run did (``psnr``), the right half as it is (``right_psnr``), and the right half after the
3×4 colour map fitted on the view's left half (``fit_psnr``; docs/captures.md,
``training/evaluation.py``). ``right`` against ``fit`` is what the held-out photos' own colours
cost the plain score; a fall in ``psnr`` that ``fit_psnr`` does not show is a colour shift of the
whole model, not a loss of detail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.app.common import load_run_data, run_config  # noqa: E402
from wgsl_splat.atomic_io import safe_file_stem  # noqa: E402
from wgsl_splat.training.evaluation import (  # noqa: E402
    colour_fitted_metrics,
    held_out_views,
    image_metrics,
)


def rescore(run: str) -> dict:
    cfg = run_config(run)
    dataset = load_run_data(cfg)
    views = held_out_views(dataset)
    if not views:
        raise SystemExit(f"{run}: its split holds no view out")
    steps = sorted(int(p.split("_")[1]) for p in os.listdir(os.path.join(run, "test"))
                   if p.startswith("iteration_"))
    truth = {}
    for i in views:
        mask = dataset.load_mask(i) if hasattr(dataset, "load_mask") else None
        truth[i] = (dataset.load_image(i), mask)
    curve = {}
    for step in steps:
        folder = os.path.join(run, "test", f"iteration_{step}")
        per_view = {}
        for i in views:
            cam = dataset.cameras[i]
            name = cam.name or f"view_{i:03d}"
            path = os.path.join(folder, safe_file_stem(name, f"view_{i:03d}") + ".png")
            if not os.path.isfile(path):
                continue
            render = iio.imread(path)[..., :3].astype(np.float64) / 255.0
            gt, mask = truth[i]
            half = render.shape[1] // 2
            whole = image_metrics(render, gt, mask)
            right = image_metrics(render[:, half:], gt[:, half:],
                                  None if mask is None else mask[:, half:])
            per_view[name] = {"psnr": whole["psnr"], "right_psnr": right["psnr"],
                              **colour_fitted_metrics(render, gt, mask)}
        if per_view:
            keys = ("psnr", "right_psnr", "fit_psnr", "fit_ssim")
            curve[step] = {k: float(np.mean([v[k] for v in per_view.values()])) for k in keys}
            curve[step]["views"] = len(per_view)
    return {"run": run, "strategy": cfg.get("strategy"), "seed": cfg.get("seed"),
            "appearance": bool(cfg.get("appearance", False)), "curve": curve}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--json", default=None, help="Write the results here.")
    p.add_argument("--plot", default=None,
                   help="Draw each run's plain and fitted curves side by side (matplotlib).")
    a = p.parse_args()
    results = []
    for run in a.runs:
        r = rescore(run)
        results.append(r)
        steps = sorted(r["curve"])
        print(f"{run} ({r['strategy']}, seed {r['seed']}, appearance {r['appearance']})")
        for key in ("psnr", "right_psnr", "fit_psnr"):
            vals = [r["curve"][s][key] for s in steps]
            print(f"  {key:10s} " + "  ".join(f"{s}: {v:.2f}" for s, v in zip(steps, vals))
                  + f"   end − best {vals[-1] - max(vals):+.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    if a.plot:
        plot(results, a.plot)


def plot(results: list[dict], path: str) -> None:
    import matplotlib  # noqa: PLC0415  (only for --plot)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for r in results:
        steps = sorted(r["curve"])
        label = (f"{r['strategy']} s{r['seed']}" + (" --appearance" if r["appearance"] else "")
                 + (f" ({r['label']})" if r.get("label") else ""))
        style = dict(ls="-" if r["appearance"] else "--", marker="o", ms=3,
                     color=f"C{int(r['seed'] or 0) % 10}")   # one colour per seed
        for ax, key in zip(axes, ("psnr", "fit_psnr")):
            ax.plot(steps, [r["curve"][s][key] for s in steps], label=label, **style)
    axes[0].set_title("plain: whole held-out views, no colour map")
    axes[1].set_title("colour-fitted: right halves, L1 map from the left halves")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out PSNR (dB)")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
