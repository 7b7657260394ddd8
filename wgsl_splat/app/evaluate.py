"""``eval``: re-evaluate a finished run on its held-out views (and at other scales)."""

from __future__ import annotations

import json
import os

import click
import numpy as np

from ..errors import UserError
from .common import (
    DEVICE_OPTION,
    DROP_NONFINITE_OPTION,
    RENDER_MODE_OPTION,
    latest_ply,
    load_model_and_mode,
    load_run_data,
    make_renderer,
    render_mode_for,
    run_background,
)


@click.command("eval")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--data", default=None, help="Scene path (default: the one recorded in OUT_DIR/cfg.json).")
@click.option("--iteration", type=int, default=None, help="Which saved model (default: the latest).")
@click.option("--scales", default=None,
              help="Comma-separated render scales relative to the training resolution, e.g. "
                   "1,0.5,0.25,0.125,2 (Mip-Splatting's multi-scale test: cameras scaled, ground "
                   "truth area-downscaled from the source images).")
@click.option("--colour-fit/--no-colour-fit", default=None,
              help="Also score each view's right half after a colour map fitted on its left half "
                   "(fit_psnr, fit_ssim, fit_l1; the protocol for --appearance runs, docs/"
                   "captures.md). Default: on for a run trained with --appearance.")
@DROP_NONFINITE_OPTION
@RENDER_MODE_OPTION
@DEVICE_OPTION
def eval_cmd(out_dir, data, iteration, scales, colour_fit, drop_nonfinite, antialiased, device):
    """Re-evaluate a finished training run on its held-out views: PSNR, SSIM, L1 into metrics.json."""
    evaluate(out_dir, data, iteration, device, drop_nonfinite, scales=scales,
             antialiased=antialiased, colour_fit=colour_fit)


def parse_scales(text: str | None) -> list[float]:
    """``--scales 1,0.5,0.25`` -> [1.0, 0.5, 0.25] (positive numbers); None -> [1.0]."""
    if text is None:
        return [1.0]
    try:
        scales = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        scales = []
    if not scales or not all(np.isfinite(s) and s > 0 for s in scales):
        raise UserError(f"--scales takes comma-separated positive numbers, got {text!r}")
    return scales


def evaluate(out_dir: str, data: str | None, iteration: int | None, device: str,
             drop_nonfinite: bool = False, scales: str | None = None,
             antialiased: bool | None = None, colour_fit: bool | None = None) -> None:
    """Re-evaluate a finished run on its held-out views (same data, resolution and split); with
    ``scales``, also at other resolutions: scale s renders the cameras at s times the training
    resolution against ground truth area-downscaled from the source images (Mip-Splatting's
    multi-scale protocol; s > 1 needs sources larger than the training images)."""
    from .run_dir import RunDirError, lock_folder

    if not os.path.isfile(os.path.join(out_dir, "cfg.json")):
        raise UserError(f"{out_dir} has no cfg.json: is it a training output folder?")
    scale_list = parse_scales(scales)
    try:
        lock = lock_folder(out_dir)   # a run training there would write metrics.json too
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    with lock:
        _evaluate(out_dir, data, iteration, device, drop_nonfinite, scale_list, antialiased,
                  colour_fit)


def _evaluate(out_dir, data, iteration, device, drop_nonfinite, scale_list, antialiased,
              colour_fit) -> None:
    from ..atomic_io import write_json
    from ..training.evaluation import Lpips, evaluate_views

    with open(os.path.join(out_dir, "cfg.json")) as f:
        cfg = json.load(f)
    run = cfg.get("run", {})
    if colour_fit is None:
        colour_fit = bool(cfg.get("appearance", False))
    if iteration is None:
        iteration, ply_path = latest_ply(out_dir)
    else:
        ply_path = os.path.join(out_dir, "point_cloud", f"iteration_{iteration}", "point_cloud.ply")
    model, mode = load_model_and_mode(ply_path, drop_nonfinite)
    config = render_mode_for(mode, antialiased, click.echo)
    background = run_background(cfg)
    train_resolution = float(run.get("resolution", 1))
    render_fn, path_name = make_renderer(device, echo=click.echo, config=config)
    lpips = Lpips()
    metrics_path = os.path.join(out_dir, "metrics.json")
    metrics = {}
    if os.path.isfile(metrics_path):
        with open(metrics_path) as f:
            metrics = json.load(f)
    for scale in scale_list:
        resolution = train_resolution / scale
        if resolution < 1.0:
            raise UserError(f"scale {scale:g} needs images {scale:g}x the training resolution "
                            f"(-r {train_resolution:g}), larger than the source images")
        dataset = load_run_data(cfg, data, resolution)
        folder = out_dir if scale == 1.0 else os.path.join(out_dir, f"scale_{scale:g}")
        result = evaluate_views(dataset, lambda cam: render_fn(model, cam, background), folder,
                                iteration, lpips=lpips, colour_fit=colour_fit)
        cam = dataset.cameras[(dataset.test_indices or dataset.train_indices)[0]]
        result.update(num_gaussians=len(model), render_mode=config.mode, scale=scale,
                      resolution=resolution, size=f"{cam.width}x{cam.height}")
        key = f"eval_iteration_{iteration}" + ("" if scale == 1.0 else f"_scale_{scale:g}")
        metrics[key] = result
        write_json(metrics_path, metrics)
        click.echo(f"scale {scale:g} ({result['size']}, {config.mode}): " + result["line"]
                   + f" ({path_name}; written to {metrics_path})")
