"""``view``: a model in an interactive window rendered by the GPU pipeline."""

from __future__ import annotations

import os

import click
import numpy as np

from ..errors import UserError
from .common import (
    ADAPTER_OPTION,
    DROP_NONFINITE_OPTION,
    RENDER_MODE_OPTION,
    gpu_context,
    load_model_and_mode,
    load_training_data,
    parse_color,
    render_mode_for,
    upload_to_gpu,
)


@click.command()
@click.argument("model_path", type=click.Path(dir_okay=False))
@click.option("--data", default=None,
              help="A scene (COLMAP folder, transforms.json scene or 'default') whose cameras N/B step through.")
@click.option("-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
              help="Downscale factor of the scene's cameras (as in training).")
@click.option("--size", default="960x720", show_default=True, help="Window size WxH.")
@click.option("--background", default="0,0,0", show_default=True, help="r,g,b in [0,1].")
@click.option("--screenshot", type=click.Path(dir_okay=False), default=None,
              help="Save the first frame to this PNG and close (scripted screenshots).")
@click.option("--frames", type=click.IntRange(min=1), default=None, help="Close after this many frames.")
@ADAPTER_OPTION
@DROP_NONFINITE_OPTION
@RENDER_MODE_OPTION
def view(model_path, data, resolution, size, background, screenshot, frames, adapter_filter,
         drop_nonfinite, antialiased):
    """Open MODEL_PATH (.ply) in an interactive window rendered by the GPU pipeline.

    Left drag orbits, right drag (or shift + drag) pans, the wheel zooms, W/A/S/D/Q/E fly, R resets
    the view, N/B step through the scene's cameras (--data), P saves a screenshot, Esc closes.
    """
    open_viewer(model_path, data, resolution, size, parse_color(background), screenshot, frames,
                  adapter_filter, drop_nonfinite, antialiased)


def open_viewer(model_path, data, resolution, size, background, screenshot, frames, adapter_filter,
         drop_nonfinite=False, antialiased: bool | None = None) -> None:
    from ..gpu.renderer import GpuRenderer
    from .view_camera import OrbitCamera
    from .viewer import Viewer, ViewerError

    try:
        w, h = (int(v) for v in size.lower().split("x"))
        assert w > 0 and h > 0
    except (ValueError, AssertionError):
        raise UserError(f"--size takes WIDTHxHEIGHT, got {size!r}") from None
    model, mode = load_model_and_mode(model_path, drop_nonfinite)
    config = render_mode_for(mode, antialiased, click.echo)
    cameras = []
    if data:
        cameras = list(load_training_data(data, resolution, False, background).cameras)
    ctx = gpu_context("gpu", adapter_filter, click.echo, "the viewer renders on the GPU")
    # The window's surface is one texture, the image one storage buffer: a size beyond either
    # would abort the process in the driver (a Rust panic), not raise.
    side = int(ctx.limits.get("max-texture-dimension-2d", 8192))
    pixels = ctx.max_binding_bytes // 12
    if w > side or h > side or w * h > pixels:
        raise UserError(f"--size {w}x{h} is beyond this adapter: at most {side} px a side and "
                        f"{pixels / 1e6:.1f} megapixels")
    renderer = GpuRenderer(ctx, config=config)
    upload_to_gpu(renderer, model, "the viewer renders on the GPU; render views with "
                                   "'render --device cpu' instead", w * h)
    if cameras:
        center = np.median(model.means, axis=0) if len(model) else np.zeros(3)
        orbit = OrbitCamera.from_camera(cameras[0], float(np.linalg.norm(center - cameras[0].center)) or 1.0)
    else:
        orbit = OrbitCamera.for_points(model.means)
    try:
        viewer = Viewer(ctx, renderer, orbit, size=(w, h),
                        title=f"wgsl_splat — {os.path.basename(model_path)} ({config.mode})",
                        cameras=cameras, background=background)
    except ViewerError as exc:
        raise UserError(str(exc)) from None
    if screenshot:
        viewer.request_screenshot(screenshot)
        frames = 1
    viewer.run(max_frames=frames)
