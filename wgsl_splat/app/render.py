"""``render``: a model from a scene's cameras or a camera file, as PNGs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import click
import numpy as np

from ..atomic_io import save_png
from ..data.datasets import scene_formats_text
from ..errors import UserError
from ..model import GaussianModel
from .common import (
    DEVICE,
    DROP_NONFINITE,
    RENDER_MODE,
    check_image_sizes,
    load_cameras_json,
    load_model_and_mode,
    load_training_data,
    make_renderer,
    parse_color,
    render_mode_for,
)
from .flags import add_flags, argument, flag, split_request


@dataclass(frozen=True)
class RenderRequest:
    """The ``render`` command's flags, in the order ``--help`` lists them."""

    model_path: str | None = argument(required=False, type=click.Path(dir_okay=False))
    data: str = flag(
        "--data", default="default", show_default=True,
        help="The scene whose cameras to render from (next to its images): "
             f"{scene_formats_text()}, or 'default' (the embedded scene).")
    resolution: int = flag(
        "-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
        help="Downscale factor of the scene's cameras (as in training).")
    camera_json: str | None = flag(
        "--camera", type=click.Path(exists=True, dir_okay=False),
        help="JSON file with one camera or a list (a run's cameras.json, 3DGS's layout): width, "
             "height, fx, fy, optional cx, cy, and position + rotation (camera-to-world, 3x3) or "
             "world_to_camera (4x4).")
    out_dir: str = flag("--out", default="out/render", show_default=True,
                        type=click.Path(file_okay=False))
    background: str = flag("--background", default="0,0,0", show_default=True,
                           help="r,g,b in [0,1].")
    limit: int | None = flag("--limit", type=click.IntRange(min=1), default=None,
                             help="Render at most this many cameras.")
    sh_degree: int | None = flag(
        "--sh-degree", type=click.IntRange(0, 3), default=None,
        help="Render with at most this SH degree (lower degrees hold more Gaussians on a GPU).")
    drop_nonfinite: bool = DROP_NONFINITE.field()
    antialiased: bool | None = RENDER_MODE.field()
    device: str = DEVICE.field()


@click.command()
@add_flags(RenderRequest)
def render(**values):
    """Render MODEL_PATH (.ply) from the cameras of a scene or a camera file, writing PNGs.

    Without MODEL_PATH the scene's point cloud is rendered as initial Gaussians (what training
    starts from), next to the scene's ground-truth images.
    """
    request, _ = split_request(RenderRequest, values)
    render_model(request, parse_color(request.background))


def render_model(request: RenderRequest, background) -> None:
    """Render a model from a scene's cameras (next to its images) or from a camera file.

    ``data``: 'default' (the embedded scene) or any scene ``train`` reads, at ``resolution``.
    Without ``model_path`` the scene's point cloud is rendered as initial Gaussians. The render
    mode is the model's (its PLY header), unless ``antialiased`` says otherwise. ``background``:
    the parsed ``--background``.
    """
    r = request
    model_path, data, camera_json, out_dir = r.model_path, r.data, r.camera_json, r.out_dir
    sh_degree = r.sh_degree
    model, mode = (load_model_and_mode(model_path, r.drop_nonfinite) if model_path
                   else (None, "classic"))
    dataset = load_training_data(data, r.resolution, False, background)
    if model is None:
        if dataset.points is None:
            raise UserError(f"{data} has no point cloud to render: pass a MODEL.ply")
        model = GaussianModel.from_points(dataset.points, dataset.point_colors, sh_degree=0)
    if sh_degree is not None and sh_degree < model.sh_degree:
        model = model.with_sh_degree(sh_degree)
    elif sh_degree is not None and sh_degree > model.sh_degree:
        click.echo(f"note: --sh-degree {sh_degree} is above what "
                   f"{model_path or 'the point cloud'} holds (SH degree {model.sh_degree}): "
                   f"rendering at degree {model.sh_degree}")
    views = [(cam, i) for i, cam in enumerate(dataset.cameras)]   # (camera, ground-truth index)
    if camera_json:
        views = [(cam, None) for cam in load_cameras_json(camera_json)[0]]
    if r.limit is not None:
        views = views[:r.limit]
    names = _output_names(views, camera_json)
    config = render_mode_for(mode, r.antialiased, click.echo)
    render_fn, path_name = make_renderer(r.device, echo=click.echo, config=config)
    check_image_sizes([cam for cam, _ in views], render_fn.limit, path_name)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out_dir}: {exc.strerror or exc}") from None
    times = []
    for (cam, gt), name in zip(views, names):
        t0 = time.perf_counter()
        image = render_fn(model, cam, background)
        times.append(time.perf_counter() - t0)
        save_png(os.path.join(out_dir, f"{name}.png"), image)
        if gt is not None:
            save_png(os.path.join(out_dir, f"{name}_gt.png"), dataset.load_image(gt))
    click.echo(f"Rendered {len(views)} views of {len(model)} Gaussians ({config.mode}) on "
               f"{path_name} (median {1000 * float(np.median(times)):.1f} ms/view) into {out_dir}")


def _output_names(views, camera_json) -> list[str]:
    """The PNG name of each view (its camera's name made a safe file name), or a one-line error
    when two views would write the same file: the second would silently replace the first."""
    from ..atomic_io import safe_file_stem

    names, owner = [], {}
    for k, (cam, gt) in enumerate(views):
        name = safe_file_stem(cam.name, f"camera_{k:03d}")
        for file in [f"{name}.png"] + ([f"{name}_gt.png"] if gt is not None else []):
            if file in owner:
                first = views[owner[file]][0].name
                what = (f"two cameras are named {cam.name!r}" if first == cam.name else
                        f"cameras {first!r} and {cam.name!r} would both be written to {file}")
                where = f" in {camera_json}" if camera_json else ""
                raise UserError(f"{what}{where} (cameras {owner[file]} and {k}): the images are "
                                f"named after the cameras, give each its own name")
            owner[file] = k
        names.append(name)
    return names
