"""What each SH band of a trained model does to its held-out views (issue 36's late decline).

    python benchmarks/sh_bands.py RUN_DIR [RUN_DIR ...] [--iteration K] [--json FILE]

For each run: its PLY (the latest, or ``--iteration``) rendered on the run's held-out views with
the view-dependent colour cut to degree 0, 1, .. up to the model's (the higher coefficients set to
zero, nothing trained again), mean and per-view PSNR. A band that raises the training views'
fit but lowers the held-out views' PSNR is view-dependent colour fitted to the training
directions that does not carry to new ones. The renders go to a temporary folder; the run's own
folder is only read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.app.common import (  # noqa: E402
    load_run_data,
    make_renderer,
    render_mode_for,
    run_background,
    run_config,
    run_model,
)
from wgsl_splat.model import num_sh_coeffs  # noqa: E402
from wgsl_splat.training.evaluation import evaluate_views  # noqa: E402


def truncated(model, degree: int):
    """``model`` with its SH coefficients above ``degree`` set to zero (same degree, same array
    shapes: the renderer's work is unchanged, only the colour's higher bands are gone)."""
    out = model.copy()
    out.sh[:, num_sh_coeffs(degree):] = 0.0
    return out


def bands(run: str, iteration: int | None, device: str = "auto") -> dict:
    cfg = run_config(run)
    iteration, model, mode = run_model(run, iteration)
    background = run_background(cfg)
    render_fn, _ = make_renderer(device, echo=lambda s: None,
                                 config=render_mode_for(mode, None, lambda s: None))
    dataset = load_run_data(cfg)
    result = {"run": run, "iteration": iteration, "degrees": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for d in range(model.sh_degree + 1):
            m = truncated(model, d)
            r = evaluate_views(dataset, lambda cam: render_fn(m, cam, background), tmp, iteration)
            result["degrees"][d] = {"psnr": r["mean"]["psnr"],
                                    "per_view": {k: v["psnr"] for k, v in r["per_view"].items()}}
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--iteration", type=int, default=None)
    p.add_argument("--json", default=None, help="Write the results here.")
    a = p.parse_args()
    results = []
    for run in a.runs:
        r = bands(run, a.iteration)
        results.append(r)
        top = max(r["degrees"])
        views = sorted(r["degrees"][top]["per_view"])
        print(f"{run} @ {r['iteration']}: held-out PSNR by SH degree kept: "
              + "  ".join(f"{d}: {v['psnr']:.2f}" for d, v in r["degrees"].items()))
        if top >= 1:
            gain = [r["degrees"][top]["per_view"][v] - r["degrees"][1]["per_view"][v] for v in views]
            print(f"  per view, degree {top} − degree 1: "
                  + "  ".join(f"{v[:6]} {g:+.2f}" for v, g in zip(views, gain)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
