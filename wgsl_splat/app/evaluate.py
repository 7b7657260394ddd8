"""``eval``: re-evaluate a finished run on its held-out views (and at other scales)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import click
import numpy as np

from ..errors import UserError
from .common import (
    DEVICE_OPTION,
    DROP_NONFINITE_OPTION,
    RENDER_MODE_OPTION,
    load_run_data,
    make_renderer,
    render_mode_for,
    run_background,
    run_config,
    run_model,
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
    evaluate(EvalRequest(out_dir, data=data, iteration=iteration, device=device,
                         drop_nonfinite=drop_nonfinite, scales=parse_scales(scales),
                         antialiased=antialiased, colour_fit=colour_fit))


@dataclass(frozen=True)
class EvalRequest:
    """What ``eval`` re-evaluates, and how (its flags; None: what the run recorded)."""

    out_dir: str
    data: str | None = None             # the scene (None: the one in cfg.json)
    iteration: int | None = None        # the saved model (None: the latest)
    device: str = "auto"
    drop_nonfinite: bool = False
    scales: tuple[float, ...] = (1.0,)  # render scales relative to the training resolution
    antialiased: bool | None = None     # None: the model's own render mode
    colour_fit: bool | None = None      # None: on for a run trained with --appearance


def parse_scales(text: str | None) -> tuple[float, ...]:
    """``--scales 1,0.5,0.25`` -> (1.0, 0.5, 0.25) (positive numbers); None -> (1.0,)."""
    if text is None:
        return (1.0,)
    try:
        scales = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        scales = []
    if not scales or not all(np.isfinite(s) and s > 0 for s in scales):
        raise UserError(f"--scales takes comma-separated positive numbers, got {text!r}")
    return tuple(scales)


def evaluate(req: EvalRequest) -> None:
    """Re-evaluate a finished run on its held-out views (same data, resolution and split); at
    other ``scales`` too: scale s renders the cameras at s times the training resolution against
    ground truth area-downscaled from the source images (Mip-Splatting's multi-scale protocol;
    s > 1 needs sources larger than the training images)."""
    from .run_dir import RunDirError, lock_folder

    cfg = run_config(req.out_dir)
    try:
        lock = lock_folder(req.out_dir)   # a run training there would write metrics.json too
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    with lock:
        _evaluate(req, cfg)


def _evaluate(req: EvalRequest, cfg: dict) -> None:
    from ..atomic_io import write_json
    from ..training.evaluation import Lpips, evaluate_views

    out_dir, iteration = req.out_dir, req.iteration
    run = cfg.get("run", {})
    colour_fit = req.colour_fit
    if colour_fit is None:
        colour_fit = bool(cfg.get("appearance", False))
    iteration, model, mode = run_model(out_dir, iteration, req.drop_nonfinite)
    config = render_mode_for(mode, req.antialiased, click.echo)
    background = run_background(cfg)
    train_resolution = float(run.get("resolution", 1))
    render_fn, path_name = make_renderer(req.device, echo=click.echo, config=config)
    lpips = Lpips()
    metrics_path = os.path.join(out_dir, "metrics.json")
    metrics = {}
    if os.path.isfile(metrics_path):
        with open(metrics_path) as f:
            metrics = json.load(f)
    for scale in req.scales:
        resolution = train_resolution / scale
        if resolution < 1.0:
            raise UserError(f"scale {scale:g} needs images {scale:g}x the training resolution "
                            f"(-r {train_resolution:g}), larger than the source images")
        dataset = load_run_data(cfg, req.data, resolution)
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
