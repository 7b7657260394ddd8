"""Command-line interface: ``python -m wgsl_splat COMMAND``.

Each command lives in a small function here and imports its heavy modules lazily so that
``--help`` stays fast and a missing GPU never breaks unrelated commands.
"""

from __future__ import annotations

import sys

import click


class UserError(click.ClickException):
    """A problem with the user's input: printed as one clear line, exit code 1, no traceback."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="wgsl_splat")
def main() -> None:
    """3D Gaussian Splatting on WGSL compute shaders (wgpu), with a NumPy reference path."""


DEVICE_OPTION = click.option(
    "--device", type=click.Choice(["auto", "gpu", "cpu"]), default="auto", show_default=True,
    help="auto: a wgpu adapter if there is one, else the NumPy path; gpu: fail without an adapter.")


def parse_color(text: str):
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        vals = []
    if len(vals) != 3:
        raise UserError(f"a colour is three comma-separated numbers in [0,1], got {text!r}")
    return vals


@main.command()
@click.argument("model_path", required=False, type=click.Path(dir_okay=False))
@click.option("--data", "data", default="default", show_default=True,
              help="Where the cameras come from: 'default' (the embedded scene).")
@click.option("--camera", "camera_json", type=click.Path(exists=True, dir_okay=False),
              help="JSON file with one camera or a list: world_to_camera (4x4), fx, fy, cx, cy, width, height.")
@click.option("--out", "out_dir", default="out/render", show_default=True, type=click.Path(file_okay=False))
@click.option("--background", default="0,0,0", show_default=True, help="r,g,b in [0,1].")
@click.option("--limit", type=int, default=None, help="Render at most this many cameras.")
@DEVICE_OPTION
def render(model_path, data, camera_json, out_dir, background, limit, device):
    """Render MODEL_PATH (.ply) from the cameras of a scene or a camera file, writing PNGs.

    Without MODEL_PATH the embedded default scene's point cloud is rendered as initial Gaussians
    (what training starts from), next to the scene's ground-truth images.
    """
    from . import commands

    commands.render(model_path, data, camera_json, out_dir, parse_color(background), limit, device)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
