"""Command-line interface: ``python -m wgsl_splat COMMAND``.

Each command lives in a small function here and imports its heavy modules lazily so that
``--help`` stays fast and a missing GPU never breaks unrelated commands.
"""

from __future__ import annotations

import math
import sys

import click

from ..errors import UserError


class SplatGroup(click.Group):
    """Turns GPU runtime errors (validation, lost device, out of memory) into one clear line."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:  # noqa: BLE001 - only GpuError is converted, the rest re-raised
            from ..gpu.runtime import GpuError

            if isinstance(exc, GpuError):
                raise click.ClickException(f"GPU error: {exc}\n(--device cpu runs the NumPy path)") from None
            raise


@click.group(cls=SplatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="wgsl_splat")
def main() -> None:
    """3D Gaussian Splatting on WGSL compute shaders (wgpu), with a NumPy reference path."""


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


DROP_NONFINITE_OPTION = click.option(
    "--drop-nonfinite", is_flag=True,
    help="Leave out the Gaussians of the PLY that hold NaN or infinity (refused otherwise).")

DEVICE_OPTION = click.option(
    "--device", type=click.Choice(["auto", "gpu", "cpu"]), default="auto", show_default=True,
    help="auto: a wgpu adapter if there is one, else the NumPy path; gpu: fail without an adapter.")


RENDER_MODE_OPTION = click.option(
    "--antialiased/--classic", "antialiased", default=None,
    help="Render mode: antialiased (Mip-Splatting's 2D and 3D filters) or classic 3DGS. Default: "
         "the mode the model was trained in (its PLY header); overriding it prints a warning.")


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
              help="The scene whose cameras to render from (next to its images): a COLMAP folder, "
                   "a transforms.json scene, an image, or 'default' (the embedded scene).")
@click.option("-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
              help="Downscale factor of the scene's cameras (as in training).")
@click.option("--camera", "camera_json", type=click.Path(exists=True, dir_okay=False),
              help="JSON file with one camera or a list: world_to_camera (4x4), fx, fy, cx, cy, width, height.")
@click.option("--out", "out_dir", default="out/render", show_default=True, type=click.Path(file_okay=False))
@click.option("--background", default="0,0,0", show_default=True, help="r,g,b in [0,1].")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Render at most this many cameras.")
@click.option("--sh-degree", type=click.IntRange(0, 3), default=None,
              help="Render with at most this SH degree (lower degrees hold more Gaussians on a GPU).")
@DROP_NONFINITE_OPTION
@RENDER_MODE_OPTION
@DEVICE_OPTION
def render(model_path, data, resolution, camera_json, out_dir, background, limit, sh_degree,
           drop_nonfinite, antialiased, device):
    """Render MODEL_PATH (.ply) from the cameras of a scene or a camera file, writing PNGs.

    Without MODEL_PATH the scene's point cloud is rendered as initial Gaussians (what training
    starts from), next to the scene's ground-truth images.
    """
    from . import commands

    commands.render(model_path, data, camera_json, out_dir, parse_color(background), limit, device,
                    resolution, sh_degree, drop_nonfinite, antialiased)


@main.command()
@click.argument("data", required=False, default="default")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Output folder (default: runs/<scene name>).")
@click.option("--preset", type=click.Choice(["smoke", "fast", "default"]), default="default", show_default=True,
              help="smoke: 300 quick steps; fast: 7k steps; default: the original 30k schedule.")
@click.option("--iters", type=click.IntRange(min=1), default=None, help="Number of steps (overrides the preset).")
@click.option("--eval", "eval_split", is_flag=True, help="Hold out every 8th image (sorted by name) as a test view.")
@click.option("-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
              help="Downscale images by this factor (cached).")
@DEVICE_OPTION
@click.option("--adapter", "adapter_filter", default=None, help="Use the first GPU adapter whose name contains this.")
@click.option("--sh-degree", type=click.IntRange(0, 3), default=None, help="Maximum SH degree (default 3).")
@click.option("--densify-from", type=int, default=None, help="First densification step (default 500).")
@click.option("--densify-until", type=int, default=None, help="Last densification step (default 15000).")
@click.option("--densify-every", type=click.IntRange(min=1), default=None, help="Steps between densifications (default 100).")
@click.option("--densify-grad-threshold", type=FiniteFloat(min=0), default=None,
              help="Mean NDC gradient that triggers densification (default 2e-4).")
@click.option("--opacity-reset-every", type=click.IntRange(min=1), default=None,
              help="Steps between opacity resets while densifying (default 3000).")
@click.option("--prune-screen-size", type=FiniteFloat(min=0), default=None,
              help="Also prune Gaussians wider than this many pixels after the first reset "
                   "(default 0 = off, as the original 3DGS effectively does).")
@click.option("--max-params-per-observation", type=FiniteFloat(min=0), default=None,
              help="adc: grow to at most this many trained parameters per observed value (3 per "
                   "training pixel); binds only for small scenes (default 1; 0 = off).")
@click.option("--strategy", type=click.Choice(["adc", "mcmc"]), default="adc", show_default=True,
              help="Densification: adc = 3DGS adaptive density control (clone, split, prune, "
                   "opacity reset); mcmc = 3DGS-MCMC (relocate dead Gaussians, grow to --cap-max, "
                   "position noise, opacity/scale regularisers).")
@click.option("--cap-max", type=click.IntRange(min=1), default=None,
              help="mcmc: the number of Gaussians the run grows to (default 1000000).")
@click.option("--mcmc-noise-lr", type=FiniteFloat(min=0), default=None,
              help="mcmc: position noise, a factor on the means' learning rate (default 5e5).")
@click.option("--opacity-reg", type=FiniteFloat(min=0), default=None,
              help="mcmc: weight of the mean-opacity regulariser (default 0.01).")
@click.option("--scale-reg", type=FiniteFloat(min=0), default=None,
              help="mcmc: weight of the mean-scale regulariser (default 0.01).")
@click.option("--white-background", is_flag=True, help="Train against a white background (synthetic scenes).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--resume", default=None,
              help="Continue the run in --out ('latest': its newest intact checkpoint) or from a "
                   "checkpoint file, with the run's own configuration.")
@click.option("--overwrite", is_flag=True,
              help="Replace the run stored in --out (removes only the files a run writes).")
@click.option("--lr-scale", type=FiniteFloat(min=0, min_open=True), default=1.0, show_default=True,
              help="Multiply every learning rate (experiments; recorded in cfg.json).")
@click.option("--eval-at", default=None, help="Comma-separated steps at which to evaluate (default: preset's).")
@click.option("--preview", is_flag=True,
              help="Show the model live in a window while it trains (GPU path; ignored without a display).")
@click.option("--antialiased", is_flag=True,
              help="Train and render with Mip-Splatting's filters (3D smoothing + 2D Mip filter), "
                   "for models that stay sharp and alias-free at other resolutions and distances.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True,
              help="Views per step: the gradient of their mean loss, densification statistics "
                   "from every view, Adam scaled as gsplat does (rates ×√B, β ← 1−B(1−β)).")
@click.option("--devices", default=None,
              help="GPU path: train on several adapters at once, 'all' or adapter indices like "
                   "0,1 (see `wgsl_splat devices`); the batch is split across them.")
@click.option("--distributed", is_flag=True,
              help="One rank per process under mpirun/srun (needs wgsl_splat[mpi]): the batch is "
                   "split across ranks, gradients all-reduced with MPI, rank 0 writes the outputs.")
@click.pass_context
def train(ctx, **options):
    """Train on DATA: a COLMAP folder, a transforms.json scene, one image, or 'default' (the
    embedded procedural scene). Writes a .ply, checkpoints, metrics.json and a log into --out,
    which holds one run: an existing run is continued (--resume latest) or replaced (--overwrite).

    SIGINT (Ctrl-C) and SIGTERM finish the current step, save a checkpoint and the PLY, and exit
    with 130 / 143."""
    from . import commands

    commands.train(**options, given=given_flags(ctx))


@main.command("eval")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--data", default=None, help="Scene path (default: the one recorded in OUT_DIR/cfg.json).")
@click.option("--iteration", type=int, default=None, help="Which saved model (default: the latest).")
@click.option("--scales", default=None,
              help="Comma-separated render scales relative to the training resolution, e.g. "
                   "1,0.5,0.25,0.125,2 (Mip-Splatting's multi-scale test: cameras scaled, ground "
                   "truth area-downscaled from the source images).")
@DROP_NONFINITE_OPTION
@RENDER_MODE_OPTION
@DEVICE_OPTION
def eval_cmd(out_dir, data, iteration, scales, drop_nonfinite, antialiased, device):
    """Re-evaluate a finished training run on its held-out views: PSNR, SSIM, L1 into metrics.json."""
    from . import commands

    commands.evaluate(out_dir, data, iteration, device, drop_nonfinite, scales=scales,
                      antialiased=antialiased)


@main.command()
@click.option("-n", "--gaussians", type=click.IntRange(min=1), default=500, show_default=True)
@click.option("--width", type=click.IntRange(min=1), default=120, show_default=True)
@click.option("--height", type=click.IntRange(min=1), default=90, show_default=True)
@click.option("--seed", type=int, default=None, help="Random scene seed (default: a fresh one, printed).")
@click.option("--sh-degree", type=click.IntRange(0, 3), default=3, show_default=True)
@click.option("--variants", type=click.Choice(["default", "all"]), default="all", show_default=True,
              help="all: every accumulation variant the adapter supports (float atomics / CAS loop, "
                   "subgroup / workgroup reduction); default: the one training uses.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=1e-3, show_default=True,
              help="Largest relative error ‖g_gpu − g_cpu‖/‖g_cpu‖ that passes.")
@click.option("--adapter", "adapter_filter", default=None, help="Use the first GPU adapter whose name contains this.")
@click.option("--antialiased", is_flag=True,
              help="Check the antialiased mode (2D Mip filter and the 3D filter of a few views).")
def gradcheck(gaussians, width, height, seed, sh_degree, variants, tolerance, adapter_filter,
              antialiased):
    """Compare one step's gradients on the GPU with the NumPy reference (float64) on a random scene.

    Prints the relative error per parameter group; exits with status 1 if any exceeds --tolerance.
    """
    from . import commands

    commands.gradcheck(gaussians, width, height, seed, sh_degree, variants, tolerance, adapter_filter,
                       antialiased)


@main.command()
@click.option("--preset", "presets", default="seeds", show_default=True,
              help="Comma-separated configurations: small (2k, 135x240), medium (10k, 490x273), large "
                   "(20k, 270x480), huge (200k, 1920x1080, GPU only); 'seeds' = small,medium,large; 'all'.")
@click.option("-n", "--gaussians", type=click.IntRange(min=1), default=None,
              help="A custom configuration instead of the presets (with --width and --height).")
@click.option("--width", type=click.IntRange(min=8), default=None)
@click.option("--height", type=click.IntRange(min=8), default=None)
@click.option("--device", type=click.Choice(["gpu", "cpu", "both"]), default="both", show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=10, show_default=True, help="Timed steps per configuration.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Also write the results as JSON.")
@click.option("--no-stages", is_flag=True, help="Skip the per-stage breakdown (timestamp queries).")
@click.option("--adapter", "adapter_filter", default=None, help="Use the first GPU adapter whose name contains this.")
@click.option("--modes", default="classic", show_default=True,
              help="Comma-separated render modes to time, each configuration in each mode one after "
                   "the other: classic, antialiased (e.g. classic,antialiased for the mode's cost).")
def bench(presets, gaussians, width, height, device, steps, warmup, json_path, no_stages, adapter_filter,
          modes):
    """Time the training step and the forward render: median and spread, per-stage device time,
    host overhead, peak device memory, and the GPU/NumPy ratio."""
    from . import commands

    commands.bench(presets, gaussians, width, height, device, steps, warmup, json_path, no_stages,
                   adapter_filter, modes)


@main.command()
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
@click.option("--adapter", "adapter_filter", default=None, help="Use the first GPU adapter whose name contains this.")
@DROP_NONFINITE_OPTION
@RENDER_MODE_OPTION
def view(model_path, data, resolution, size, background, screenshot, frames, adapter_filter,
         drop_nonfinite, antialiased):
    """Open MODEL_PATH (.ply) in an interactive window rendered by the GPU pipeline.

    Left drag orbits, right drag (or shift + drag) pans, the wheel zooms, W/A/S/D/Q/E fly, R resets
    the view, N/B step through the scene's cameras (--data), P saves a screenshot, Esc closes.
    """
    from . import commands

    commands.view(model_path, data, resolution, size, parse_color(background), screenshot, frames,
                  adapter_filter, drop_nonfinite, antialiased)


@main.command()
def devices():
    """List the wgpu adapters (GPU and software) this machine offers."""
    from . import commands

    commands.devices()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
