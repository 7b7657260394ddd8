"""``view``: a model in an interactive window rendered by the GPU pipeline."""

from __future__ import annotations

import os
from dataclasses import dataclass

import click
import numpy as np

from ..camera import Camera
from ..data.datasets import scene_formats_text
from ..errors import UserError
from .common import (
    ADAPTER,
    DROP_NONFINITE,
    RENDER_MODE,
    gpu_context,
    load_cameras_json,
    load_model_and_mode,
    load_training_data,
    parse_color,
    pixels_text,
    render_mode_for,
    upload_to_gpu,
)
from .flags import add_flags, argument, flag, split_request
from .web_viewer import HOST, PORT


@dataclass(frozen=True)
class ViewRequest:
    """The ``view`` command's flags, in the order ``--help`` lists them."""

    model_path: str = argument(type=click.Path(dir_okay=False))
    data: str | None = flag(
        "--data", default=None,
        help=f"A scene ({scene_formats_text()}, or 'default') whose cameras N/B step through "
             f"(default: the cameras.json of the model's run, when there is one).")
    resolution: int = flag(
        "-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
        help="Downscale factor of the scene's cameras (as in training).")
    size: str | None = flag(
        "--size", default=None,
        help="Window size WxH (default: the shape of the camera it opens through, within "
             "960x720; 960x720 without cameras).")
    background: str = flag("--background", default="0,0,0", show_default=True,
                           help="r,g,b in [0,1].")
    screenshot: str | None = flag(
        "--screenshot", type=click.Path(dir_okay=False), default=None,
        help="Save the first frame to this PNG and close (scripted screenshots).")
    frames: int | None = flag("--frames", type=click.IntRange(min=1), default=None,
                              help="Close after this many frames.")
    web: bool = flag(
        "--web", is_flag=True,
        help="Serve the viewer to web browsers instead of opening a window (needs "
             "wgsl_splat[web]): rendered here in the model's mode and streamed; the scene's "
             "cameras (--data, or the run's cameras.json) are frusta to click.")
    host: str = HOST.field()
    port: int = PORT.field()
    adapter_filter: str | None = ADAPTER.field()
    drop_nonfinite: bool = DROP_NONFINITE.field()
    antialiased: bool | None = RENDER_MODE.field()


@click.command()
@add_flags(ViewRequest)
def view(**values):
    """Open MODEL_PATH (.ply) in an interactive window rendered by the GPU pipeline.

    Left drag orbits, right drag (or shift + drag) pans, the wheel zooms, W/A/S/D/Q/E fly, R resets
    the view, N/B step through the cameras, P saves a screenshot, Esc closes.
    With --web, a browser at the printed address does the same with the mouse (Ctrl-C stops).
    Both open through the first training camera: --data's, else that of the cameras.json beside
    the PLY or in its run folder (OUT/cameras.json, which train writes); else around the points.
    """
    request, _ = split_request(ViewRequest, values)
    background = parse_color(request.background)
    if request.web:
        serve_web(request, background)
        return
    open_viewer(request, background)


def serve_web(request: ViewRequest, background) -> None:
    """``view --web``: the model on a web page, rendered by the GPU pipeline (the NumPy reference
    without an adapter), until Ctrl-C; ``background``: the parsed ``--background``."""
    from .common import make_renderer
    from .web_viewer import WebScene, WebViewer, check_port, import_viser

    r = request
    import_viser()                  # the install hint and the port before any loading
    check_port(r.host, r.port)
    model, mode = load_model_and_mode(r.model_path, r.drop_nonfinite)
    config = render_mode_for(mode, r.antialiased, click.echo)
    cameras, train = view_cameras(r, background)
    render, path_name = make_renderer("auto", r.adapter_filter, click.echo, config)
    gpu = path_name.startswith("gpu")
    if gpu:   # upload now: a model too large for the adapter is one line before serving
        render(model, Camera(np.eye(4), 8.0, 8.0, 4.0, 4.0, 8, 8), background)
    viewer = WebViewer(r.host, r.port, title=f"wgsl_splat — {os.path.basename(r.model_path)}",
                       mode=config.mode,
                       scene=WebScene(cameras, points=model.means, initial=train[0] if train else 0),
                       log=click.echo, max_pixels=1920 * 1080 if gpu else 320 * 240,
                       announce=True)
    click.echo(f"Web viewer: {viewer.url} — {len(model)} Gaussians ({config.mode}) rendered on "
               f"{path_name}; Ctrl-C stops")
    viewer.serve(lambda camera: render(model, camera, background))
    click.echo(f"web viewer stopped after {viewer.frames} frames")


def view_cameras(request: ViewRequest, background) -> tuple[list[Camera], list[int]]:
    """The cameras the viewers show and start through, and which of them trained: --data's
    (every one), else those of the model's run (its cameras.json), else none."""
    from .view_camera import run_cameras_path

    if request.data:
        cameras = list(load_training_data(request.data, request.resolution, False,
                                          background).cameras)
        return cameras, list(range(len(cameras)))
    path = run_cameras_path(request.model_path)
    if path is None:
        return [], []
    cameras, train = load_cameras_json(path)
    click.echo(f"{len(cameras)} cameras from {path}")
    return cameras, train


WINDOW = (960, 720)      # the default window's bounds


def window_size(text: str | None, camera: Camera | None) -> tuple[int, int]:
    """``--size``, or by default the shape of ``camera`` (the one the window opens through, so
    the first frame is framed as the photo) within :data:`WINDOW`, or WINDOW itself."""
    if text is None:
        if camera is None:
            return WINDOW
        fit = min(WINDOW[0] / camera.width, WINDOW[1] / camera.height)
        return max(1, round(camera.width * fit)), max(1, round(camera.height * fit))
    try:
        w, h = (int(v) for v in text.lower().split("x"))
        assert w > 0 and h > 0
    except (ValueError, AssertionError):
        raise UserError(f"--size takes WIDTHxHEIGHT, got {text!r}") from None
    return w, h


def open_viewer(request: ViewRequest, background) -> None:
    """``view``: the model in a window until it is closed (or ``--frames``, ``--screenshot``)."""
    from ..gpu.renderer import GpuRenderer
    from .view_camera import start_view
    from .viewer import Viewer, ViewerError

    r = request
    window_size(r.size, None)            # a malformed --size before any loading
    model, mode = load_model_and_mode(r.model_path, r.drop_nonfinite)
    config = render_mode_for(mode, r.antialiased, click.echo)
    cameras, train = view_cameras(r, background)
    orbit, first = start_view(cameras, train, model.means)
    w, h = window_size(r.size, cameras[first] if first >= 0 else None)
    ctx = gpu_context("gpu", r.adapter_filter, click.echo, "the viewer renders on the GPU")
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
    try:
        viewer = Viewer(renderer, orbit, size=(w, h),
                        title=f"wgsl_splat — {os.path.basename(r.model_path)} ({config.mode})",
                        cameras=cameras, background=background)
    except ViewerError as exc:
        raise UserError(str(exc)) from None
    viewer.set_home_camera(first)
    frames = r.frames
    if r.screenshot:
        viewer.request_screenshot(r.screenshot)
        frames = 1
    viewer.run(max_frames=frames)
