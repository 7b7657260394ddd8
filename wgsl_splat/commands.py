"""Implementations of the CLI commands (kept apart from click so they stay testable)."""

from __future__ import annotations

import json
import os
import time

import numpy as np

from .atomic_io import save_png
from .camera import Camera
from .cli import UserError
from .model import GaussianModel


def load_cameras_json(path) -> list[Camera]:
    try:
        with open(path) as f:
            raw = json.load(f)
        items = raw if isinstance(raw, list) else [raw]
        return [Camera(np.asarray(c["world_to_camera"], dtype=np.float64), c["fx"], c["fy"], c["cx"],
                       c["cy"], c["width"], c["height"], c.get("name", f"camera_{i:03d}"))
                for i, c in enumerate(items)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"cannot read cameras from {path}: {exc}") from None


def load_model(path) -> GaussianModel:
    from .ply import PlyError, load_ply

    if not os.path.isfile(path):
        raise UserError(f"model file not found: {path}")
    try:
        return load_ply(path)
    except PlyError as exc:
        raise UserError(f"{path}: {exc}") from None


def make_renderer(device: str):
    """A function (model, camera, background) -> (H,W,3) image on the chosen path, and its name."""
    from .reference import render as cpu_render

    def cpu(model, camera, background):
        return cpu_render(model, camera, background).image

    return cpu, "cpu (NumPy reference)"


def render(model_path, data, camera_json, out_dir, background, limit, device) -> None:
    import click

    ground_truth = None
    if data != "default":
        raise UserError(f"--data {data!r}: only 'default' (the embedded scene) is supported so far")
    from .default_scene import make_default_scene

    scene = make_default_scene()
    cameras = scene.cameras
    if camera_json:
        cameras, ground_truth = load_cameras_json(camera_json), None
    else:
        ground_truth = scene.images
    if model_path:
        model = load_model(model_path)
    else:
        model = GaussianModel.from_points(scene.points, scene.colors, sh_degree=0)
    if limit is not None:
        cameras = cameras[:limit]
    render_fn, path_name = make_renderer(device)
    os.makedirs(out_dir, exist_ok=True)
    times = []
    for i, cam in enumerate(cameras):
        t0 = time.perf_counter()
        image = render_fn(model, cam, background)
        times.append(time.perf_counter() - t0)
        name = cam.name or f"camera_{i:03d}"
        save_png(os.path.join(out_dir, f"{name}.png"), image)
        if ground_truth is not None:
            save_png(os.path.join(out_dir, f"{name}_gt.png"), ground_truth[i])
    click.echo(f"Rendered {len(cameras)} views of {len(model)} Gaussians on {path_name} "
               f"(median {1000 * float(np.median(times)):.1f} ms/view) into {out_dir}")
