"""``gradcheck``: one step's gradients on the GPU against the NumPy reference (the comparison itself: :mod:`wgsl_splat.tools.gradcheck`)."""

from __future__ import annotations

from dataclasses import dataclass

import click
import numpy as np

from ..render_config import render_config
from .common import ADAPTER, gpu_context, mode_of_flag
from .flags import add_flags, flag, split_request


@dataclass(frozen=True)
class GradcheckRequest:
    """The ``gradcheck`` command's flags, in the order ``--help`` lists them."""

    gaussians: int = flag("-n", "--gaussians", type=click.IntRange(min=1), default=500,
                          show_default=True)
    width: int = flag("--width", type=click.IntRange(min=1), default=120, show_default=True)
    height: int = flag("--height", type=click.IntRange(min=1), default=90, show_default=True)
    seed: int | None = flag("--seed", type=int, default=None,
                            help="Random scene seed (default: a fresh one, printed).")
    sh_degree: int = flag("--sh-degree", type=click.IntRange(0, 3), default=3, show_default=True)
    variants: str = flag(
        "--variants", type=click.Choice(["default", "all"]), default="all", show_default=True,
        help="all: every accumulation variant the adapter supports (float atomics / CAS loop, "
             "subgroup / workgroup reduction); default: the one training uses.")
    tolerance: float = flag("--tolerance", type=click.FloatRange(min=0), default=1e-3,
                            show_default=True,
                            help="Largest relative error ‖g_gpu − g_cpu‖/‖g_cpu‖ that passes.")
    adapter_filter: str | None = ADAPTER.field()
    antialiased: bool = flag(
        "--antialiased/--classic", default=False,
        help="The render mode to check (antialiased: the 2D Mip filter and the 3D filter of a few "
             "views).")


@click.command()
@add_flags(GradcheckRequest)
def gradcheck(**values):
    """Compare one step's gradients on the GPU with the NumPy reference (float64) on a random scene.

    Prints the relative error per parameter group; exits with status 1 if any exceeds --tolerance.
    """
    run(split_request(GradcheckRequest, values)[0])


def run(request: GradcheckRequest) -> None:
    from ..contract.optim import OptimConfig
    from ..gpu.layout import Layout
    from ..gpu.step import GpuTrainStep
    from ..tools.gradcheck import compare, format_table, make_problem
    from ..tools.random_scene import filter_cameras

    r = request
    n, width, height, seed, sh_degree = r.gaussians, r.width, r.height, r.seed, r.sh_degree
    ctx = gpu_context("gpu", r.adapter_filter, click.echo, "gradcheck needs a GPU adapter")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (1 << 32))
    config = render_config(mode_of_flag(r.antialiased))
    model, cam, target = make_problem(seed, n, width, height, sh_degree, config=config)
    click.echo(f"Random scene: seed {seed}, {n} Gaussians (edge cases included), SH degree "
               f"{sh_degree}, {width}x{height}, {config.mode}")
    combos = [(None, None)]
    if r.variants == "all":
        combos = [(fa, sg) for fa in (True, False) for sg in (True, False)
                  if (ctx.has_float_atomics or not fa) and (ctx.has_subgroups or not sg)]
    failed = False
    for fa, sg in combos:
        step = GpuTrainStep(ctx, model, OptimConfig(),
                            layout=Layout.of(ctx, float_atomics=fa, subgroups=sg),
                            render_config=config)
        step.set_filter_cameras(filter_cameras(cam))
        step.update_filter_3d()
        errors = compare(step, model, cam, target, tolerance=r.tolerance)
        click.echo(f"\nGPU ({step.backward.variant}) vs NumPy reference (float64):")
        click.echo(format_table(errors))
        failed |= not all(e.ok for e in errors)
    click.echo("\nFAILED: some gradients differ by more than the tolerance" if failed else "\nall passed")
    if failed:
        raise SystemExit(1)
