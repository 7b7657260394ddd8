"""``view``: a model in an interactive window rendered by the GPU pipeline."""

from __future__ import annotations

import os

import click
import numpy as np

from ..camera import Camera
from ..data.datasets import scene_formats_text
from ..errors import UserError
from .common import (
    ADAPTER_OPTION,
    DROP_NONFINITE_OPTION,
    RENDER_MODE_OPTION,
    gpu_context,
    load_model_and_mode,
    load_training_data,
    parse_color,
    pixels_text,
    render_mode_for,
    upload_to_gpu,
)
from .web_viewer import HOST_OPTION, PORT_OPTION


@click.command()
@click.argument("model_path", type=click.Path(dir_okay=False))
@click.option("--data", default=None,
              help=f"A scene ({scene_formats_text()}, or 'default') whose cameras N/B step through.")
@click.option("-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
              help="Downscale factor of the scene's cameras (as in training).")
@click.option("--size", default="960x720", show_default=True, help="Window size WxH.")
@click.option("--background", default="0,0,0", show_default=True, help="r,g,b in [0,1].")
@click.option("--screenshot", type=click.Path(dir_okay=False), default=None,
              help="Save the first frame to this PNG and close (scripted screenshots).")
@click.option("--frames", type=click.IntRange(min=1), default=None, help="Close after this many frames.")
@click.option("--web", is_flag=True,
              help="Serve the viewer to web browsers instead of opening a window (needs "
                   "wgsl_splat[web]): rendered here in the model's mode and streamed; the "
                   "scene's cameras (--data) are frusta to click.")
@HOST_OPTION
@PORT_OPTION
@ADAPTER_OPTION
@DROP_NONFINITE_OPTION
@RENDER_MODE_OPTION
def view(model_path, data, resolution, size, background, screenshot, frames, web, host, port,
         adapter_filter, drop_nonfinite, antialiased):
    """Open MODEL_PATH (.ply) in an interactive window rendered by the GPU pipeline.

    Left drag orbits, right drag (or shift + drag) pans, the wheel zooms, W/A/S/D/Q/E fly, R resets
    the view, N/B step through the scene's cameras (--data), P saves a screenshot, Esc closes.
    With --web, a browser at the printed address does the same with the mouse (Ctrl-C stops).
    """
    if web:
        serve_web(model_path, data, resolution, parse_color(background), host, port,
                  adapter_filter, drop_nonfinite, antialiased)
        return
    open_viewer(model_path, data, resolution, size, parse_color(background), screenshot, frames,
                  adapter_filter, drop_nonfinite, antialiased)


def serve_web(model_path, data, resolution, background, host, port, adapter_filter=None,
              drop_nonfinite=False, antialiased: bool | None = None) -> None:
    """``view --web``: the model on a web page, rendered by the GPU pipeline (the NumPy reference
    without an adapter), until Ctrl-C."""
    from .common import make_renderer
    from .web_viewer import WebViewer, check_port, import_viser

    import_viser()                  # the install hint and the port before any loading
    check_port(host, port)
    model, mode = load_model_and_mode(model_path, drop_nonfinite)
    config = render_mode_for(mode, antialiased, click.echo)
    cameras = list(load_training_data(data, resolution, False, background).cameras) if data else []
    render, path_name = make_renderer("auto", adapter_filter, click.echo, config)
    gpu = path_name.startswith("gpu")
    if gpu:   # upload now: a model too large for the adapter is one line before serving
        render(model, Camera(np.eye(4), 8.0, 8.0, 4.0, 4.0, 8, 8), background)
    viewer = WebViewer(host, port, title=f"wgsl_splat — {os.path.basename(model_path)}",
                       mode=config.mode, cameras=cameras, points=model.means, log=click.echo,
                       max_pixels=1920 * 1080 if gpu else 320 * 240, announce=True)
    click.echo(f"Web viewer: {viewer.url} — {len(model)} Gaussians ({config.mode}) rendered on "
               f"{path_name}; Ctrl-C stops")
    viewer.serve(lambda camera: render(model, camera, background))
    click.echo(f"web viewer stopped after {viewer.frames} frames")


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
                        f"{pixels_text(pixels, 1)}")
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
