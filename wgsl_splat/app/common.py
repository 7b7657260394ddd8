"""What several commands share: path and adapter selection, model and camera loading, the
render-mode and device options, small parsers. Heavy modules are imported inside the functions so
that ``--help`` stays fast and a missing GPU never breaks unrelated commands."""

from __future__ import annotations

import json
import math
import os

import click

from ..camera import Camera, cameras_from_json
from ..errors import UserError
from ..model import GaussianModel
from ..render_config import CLASSIC, RENDER_MODES, RenderConfig, render_config
from .flags import Flag


class FiniteFloat(click.FloatRange):
    """A float range that also refuses nan and infinity (``FloatRange`` lets nan through: every
    comparison with nan is false)."""

    name = "finite float"

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if not math.isfinite(value):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return value


def given_flags(ctx: click.Context) -> frozenset:
    """Names of the parameters the user set (command line or environment), not left at default."""
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return frozenset(p.name for p in ctx.command.params if ctx.get_parameter_source(p.name) in sources)



DROP_NONFINITE = Flag(("--drop-nonfinite",), dict(
    is_flag=True,
    help="Leave out the Gaussians of the PLY that hold NaN or infinity (refused otherwise)."))

DEVICE = Flag(("--device",), dict(
    type=click.Choice(["auto", "gpu", "cpu"]), default="auto", show_default=True,
    help="auto: a wgpu adapter if there is one, else the NumPy path; gpu: fail without an adapter."))

ADAPTER = Flag(("--adapter",), dict(
    default=None,
    help="Use the first GPU adapter whose name contains this (see `wgsl_splat devices`)."))

# The render mode of a model someone renders: the one it was trained in unless overridden (train
# declares its own in TrainConfig.render_mode, with the same flag).
RENDER_MODE = Flag(("--antialiased/--classic",), dict(
    default=None,
    help="Render mode: antialiased (Mip-Splatting's 2D and 3D filters) or classic 3DGS. Default: "
         "the mode the model was trained in (its PLY header); overriding it prints a warning."))

DROP_NONFINITE_OPTION = DROP_NONFINITE.decorator("drop_nonfinite")
DEVICE_OPTION = DEVICE.decorator("device")
ADAPTER_OPTION = ADAPTER.decorator("adapter_filter")
RENDER_MODE_OPTION = RENDER_MODE.decorator("antialiased")


def mode_of_flag(antialiased: bool) -> str:
    """The render mode named by the ``--antialiased/--classic`` flag."""
    return RENDER_MODES[1] if antialiased else RENDER_MODES[0]

def parse_color(text: str):
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        vals = []
    if len(vals) != 3:
        raise UserError(f"a colour is three comma-separated numbers in [0,1], got {text!r}")
    return vals



def load_cameras_json(path) -> tuple[list[Camera], list[int]]:
    """The cameras of a cameras file (``camera.CAMERAS_FILE``'s layout, which the trainer writes)
    and the indices of its training cameras."""
    try:
        with open(path) as f:
            return cameras_from_json(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"cannot read cameras from {path}: {exc}") from None


def load_model(path, drop_nonfinite: bool = False) -> GaussianModel:
    return load_model_and_mode(path, drop_nonfinite)[0]


def load_model_and_mode(path, drop_nonfinite: bool = False) -> tuple[GaussianModel, str]:
    """The model of a PLY and the render mode its header declares (one-line errors)."""
    from ..data.ply import NonFinitePlyError, PlyError, load_ply_with_mode

    if not os.path.isfile(path):
        raise UserError(f"model file not found: {path}")
    notes = []
    try:
        model, mode = load_ply_with_mode(path, drop_nonfinite=drop_nonfinite, notes=notes)
    except NonFinitePlyError as exc:
        raise UserError(f"{exc}; --drop-nonfinite leaves them out") from None
    except PlyError as exc:   # its message starts with the path already
        raise UserError(str(exc)) from None
    for note in notes:
        click.echo(f"note: {note}")
    return model, mode


def render_mode_for(model_mode: str, antialiased: bool | None, echo) -> RenderConfig:
    """The render configuration of a model trained in ``model_mode`` given the command line's
    ``--antialiased/--classic`` (None: as trained); rendering it otherwise prints a warning."""
    mode = model_mode if antialiased is None else ("antialiased" if antialiased else "classic")
    if mode != model_mode:
        effect = ("only the 2D Mip filter applies, it has no 3D filter" if mode == "antialiased"
                  else "without the 2D Mip filter, as viewers that do not know it show it")
        echo(f"Warning: the model was trained {model_mode}; rendering it {mode} as asked ({effect})")
    return render_config(mode)


def gpu_context(device: str, adapter_filter: str | None = None, echo=None, why: str = ""):
    """The GPU context for ``--device`` (``None``: use the NumPy path), adapter errors turned into a
    :class:`UserError` that starts with ``why`` (e.g. "the viewer renders on the GPU")."""
    from ..gpu.runtime import GpuError, select_device

    try:
        ctx = select_device(device, adapter_filter, echo=echo)
    except GpuError as exc:
        raise UserError(f"{why}: {exc}" if why else str(exc)) from None
    if ctx is not None and echo is not None and ctx.backend == "OpenGL":
        echo(opengl_note(ctx))
    return ctx


def opengl_note(ctx) -> str:
    """What wgpu's OpenGL adapter (its choice when no Vulkan driver is installed) costs."""
    missing = [f for f, has in (("float atomics", ctx.has_float_atomics),
                                ("subgroups", ctx.has_subgroups)) if not has]
    lacks = f", without {' and '.join(missing)}" if missing else ""
    return (f"note: this is wgpu's OpenGL adapter{lacks}: the shaders take their slower paths. A "
            f"Vulkan adapter (Linux: mesa-vulkan-drivers, or the GPU's Vulkan driver) or Metal "
            f"would be faster; see `wgsl_splat devices`")


def upload_to_gpu(renderer, model, way_out: str, pixels: int = 0) -> None:
    """``renderer.upload_model(model)``; a model beyond the adapter's bindings or memory (with an
    image of ``pixels``) is a one-line error with the size it needs, before anything is made."""
    from ..gpu.renderer import ModelTooLargeError, check_model_fits

    try:
        check_model_fits(renderer.ctx, len(model), model.sh.shape[1], pixels=pixels,
                         probe=True)
        renderer.upload_model(model)
    except ModelTooLargeError as exc:
        raise UserError(f"{exc}: {way_out}") from None


# The NumPy path's image memory: the float32 image, the 8-bit copy and the PNG being encoded
# (measured: 18 bytes a pixel more at 9 than at 1 megapixel), rounded up.
CPU_BYTES_PER_PIXEL = 24


def host_memory_bytes() -> int | None:
    """This machine's physical memory (None where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def image_limit(ctx) -> tuple[int | None, int | None, str]:
    """``(most pixels, longest side, why)`` of one image the path renders (None: no bound), the
    one rule both paths apply before anything is rendered: the GPU binds the image whole (12 bytes
    a pixel in one storage binding, at most 65 535 tiles a side); the NumPy path keeps it in host
    memory and is allowed half of it."""
    if ctx is not None:
        from ..env import size_text

        tile = CLASSIC.tile_size
        setting = getattr(ctx, "binding_setting", None)
        return (ctx.max_binding_bytes // 12, 65535 * tile,
                f"this adapter binds at most {size_text(ctx.max_binding_bytes)} per buffer"
                f"{f' ({setting})' if setting else ''}, 12 bytes a pixel")
    memory = host_memory_bytes()
    if memory is None:
        return None, None, ""
    return (memory // 2 // CPU_BYTES_PER_PIXEL, None,
            f"the NumPy renderer needs about {CPU_BYTES_PER_PIXEL} bytes a pixel and is allowed "
            f"half of this machine's {memory / 2**30:.0f} GiB")


def pixels_text(n: int, decimals: int) -> str:
    """``12.5 megapixels``; below a megapixel, ``36864 pixels`` (a small binding limit's)."""
    return f"{n / 1e6:.{decimals}f} megapixels" if n >= 1e6 else f"{n} pixels"


def check_image_sizes(cameras, limit, path_name: str) -> None:
    """Refuse, in one line, the first camera whose image is beyond ``limit`` (:func:`image_limit`)."""
    pixels, side, why = limit
    for cam in cameras:
        w, h = cam.width, cam.height
        if (pixels is not None and w * h > pixels) or (side is not None and max(w, h) > side):
            name = f"camera {cam.name!r}" if cam.name else "a camera"
            bound = (f"at most {side} px a side" if side is not None and max(w, h) > side
                     else f"at most {pixels_text(pixels, 1)}")
            raise UserError(f"{name}: its {w}x{h} image ({pixels_text(w * h, 0)}) is beyond "
                            f"what {path_name} renders: {bound} ({why})")


def make_renderer(device: str, adapter_filter: str | None = None, echo=None,
                  config: RenderConfig = CLASSIC):
    """A function (model, camera, background) -> (H,W,3) image on the chosen path, and its name.
    The GPU renderer keeps the model resident and re-uploads only when another model is passed;
    the NumPy path renders in bounded memory (:func:`~wgsl_splat.reference.render_image`).
    Antialiased models come from PLYs with their 3D filter fused in: rendered with a zero filter.
    The function's ``limit`` is the largest image it renders (:func:`image_limit`)."""
    from ..reference import render_image

    def cpu(model, camera, background):
        return render_image(model, camera, background, config=config)

    ctx = None if device == "cpu" else gpu_context(device, adapter_filter, echo)
    if ctx is None:
        cpu.limit = image_limit(None)
        return cpu, "cpu (NumPy reference)"
    from ..gpu.renderer import GpuRenderer

    renderer = GpuRenderer(ctx, config=config)
    uploaded = {"model": None}

    def gpu(model, camera, background):
        if uploaded["model"] is not model:
            upload_to_gpu(renderer, model, "render it with --device cpu (or, for render, a lower "
                                           "--sh-degree)", camera.width * camera.height)
            uploaded["model"] = model
        return renderer.render(camera, background)

    gpu.limit = image_limit(ctx)
    return gpu, f"gpu ({ctx.name})"


def load_training_data(data: str, resolution: int, eval_split: bool, background):
    from ..data.datasets import DatasetError, load_dataset

    try:
        if data == "default":
            from ..data.default_scene import default_dataset

            return default_dataset(resolution=resolution, eval_split=eval_split,
                                   background=background)
        return load_dataset(data, resolution=resolution, eval_split=eval_split,
                            background=background)
    except DatasetError as exc:
        raise UserError(str(exc)) from None


def run_background(cfg: dict) -> tuple:
    """The background colour a run trained with (its ``cfg.json``, parsed)."""
    return tuple(cfg.get("background", (0.0, 0.0, 0.0)))


def load_run_data(cfg: dict, data: str | None = None, resolution: float | None = None):
    """The dataset a run trained on as its ``cfg.json`` (parsed) records it: data path, resolution,
    split and background; ``data`` and ``resolution`` override the recorded ones."""
    run = cfg.get("run", {})
    data = data or run.get("data")
    if data is None:
        raise UserError("cfg.json does not record the data path: pass --data")
    if resolution is None:
        resolution = float(run.get("resolution", 1))
    return load_training_data(data, resolution, run.get("eval_split", True), run_background(cfg))


def latest_ply(out_dir: str) -> tuple[int, str]:
    base = os.path.join(out_dir, "point_cloud")
    found = []
    if os.path.isdir(base):
        for d in os.listdir(base):
            if d.startswith("iteration_") and d[10:].isdigit():
                p = os.path.join(base, d, "point_cloud.ply")
                if os.path.isfile(p):
                    found.append((int(d[10:]), p))
    if not found:
        raise UserError(f"no point_cloud/iteration_*/point_cloud.ply in {out_dir}: is it a training output folder?")
    return max(found)


def run_config(out_dir: str) -> dict:
    """A run's ``cfg.json``, parsed (a one-line error for a folder that holds none)."""
    path = os.path.join(out_dir, "cfg.json")
    if not os.path.isfile(path):
        raise UserError(f"{out_dir} has no cfg.json: is it a training output folder?")
    with open(path) as f:
        return json.load(f)


def run_model(out_dir: str, iteration: int | None = None,
              drop_nonfinite: bool = False) -> tuple[int, GaussianModel, str]:
    """A run's saved model at ``iteration`` (None: the latest), its iteration and render mode."""
    if iteration is None:
        iteration, ply = latest_ply(out_dir)
    else:
        ply = os.path.join(out_dir, "point_cloud", f"iteration_{iteration}", "point_cloud.ply")
    model, mode = load_model_and_mode(ply, drop_nonfinite)
    return iteration, model, mode