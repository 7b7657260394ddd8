"""``bench``: training-step and render timings (the benchmark itself: :mod:`wgsl_splat.tools.bench`)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from ..errors import UserError
from ..render_config import RENDER_MODES
from .common import ADAPTER
from .flags import add_flags, flag, split_request


@dataclass(frozen=True)
class BenchRequest:
    """The ``bench`` command's flags, in the order ``--help`` lists them."""

    presets: str = flag(
        "--preset", default="seeds", show_default=True,
        help="Comma-separated configurations: small (2k, 135x240), medium (10k, 490x273), large "
             "(20k, 270x480), huge (200k, 1920x1080, GPU only), mem (500k, 1280x800), 1m (1M, "
             "1920x1080), 3m (3M, 1920x1080); 'seeds' = small,medium,large; 'all' = seeds and "
             "huge.")
    gaussians: int | None = flag(
        "-n", "--gaussians", type=click.IntRange(min=1), default=None,
        help="A custom configuration instead of the presets (with --width and --height).")
    width: int | None = flag("--width", type=click.IntRange(min=8), default=None)
    height: int | None = flag("--height", type=click.IntRange(min=8), default=None)
    device: str = flag("--device", type=click.Choice(["gpu", "cpu", "both"]), default="both",
                       show_default=True)
    steps: int = flag("--steps", type=click.IntRange(min=1), default=10, show_default=True,
                      help="Timed steps per configuration.")
    warmup: int = flag("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
    json_path: str | None = flag("--json", type=click.Path(dir_okay=False), default=None,
                                 help="Also write the results as JSON.")
    no_stages: bool = flag("--no-stages", is_flag=True,
                           help="Skip the per-stage breakdown (timestamp queries).")
    layout: str = flag(
        "--layout", type=click.Choice(["adapter", "gpu", "cpu", "both"]), default="adapter",
        show_default=True,
        help="The GPU path's kernel layout: the adapter's own, a GPU's (64 threads per tile, "
             "parallel scans, per-splat emission) or a CPU driver's (lavapipe's: 8 threads per "
             "tile, one-workgroup scans, the emission table), or both side by side.")
    adapter_filter: str | None = ADAPTER.field()
    modes: str = flag(
        "--modes", default=RENDER_MODES[0], show_default=True,
        help=f"Comma-separated render modes to time, each configuration in each mode one after "
             f"the other: {', '.join(RENDER_MODES)} (all of them for the modes' costs).")


@click.command()
@add_flags(BenchRequest)
def bench(**values):
    """Time the training step and the forward render: median and spread, per-stage device time,
    host overhead, peak device memory, and the GPU/NumPy ratio."""
    run(split_request(BenchRequest, values)[0])


def run(request: BenchRequest) -> None:
    r = request
    modes, device = r.modes, r.device
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in mode_list if m not in RENDER_MODES]
    if bad or not mode_list:
        raise UserError(f"unknown render mode(s) {', '.join(bad) or repr(modes)}; choose from "
                        f"{', '.join(RENDER_MODES)}")

    from ..atomic_io import write_json
    from ..tools.bench import (
        ALL_SCENES,
        BENCH_SCENES,
        SEED_SCENES,
        Config,
        format_report,
        run_bench,
    )

    n, width, height, presets = r.gaussians, r.width, r.height, r.presets
    if n is not None or width is not None or height is not None:
        if None in (n, width, height):
            raise UserError("a custom configuration needs all of -n, --width and --height")
        configs = [Config("custom", n, width, height)]
    else:
        names = {"seeds": list(SEED_SCENES), "all": list(ALL_SCENES)}.get(presets)
        names = names or [p.strip() for p in presets.split(",") if p.strip()]
        unknown = [p for p in names if p not in BENCH_SCENES]
        if unknown:
            raise UserError(f"unknown preset(s) {', '.join(unknown)}; choose from {', '.join(BENCH_SCENES)}, seeds, all")
        configs = [Config(p, *BENCH_SCENES[p]) for p in names]
    devices = ("gpu", "cpu") if device == "both" else (device,)
    ctx = None
    if "gpu" in devices:
        from ..gpu.runtime import GpuError, select_device

        try:
            ctx = select_device("gpu", r.adapter_filter, echo=click.echo)
        except GpuError as exc:
            if device == "gpu":
                raise UserError(str(exc)) from None
            click.echo(f"Warning: {exc}; timing the NumPy path only")
    layouts = {"adapter": (None,), "both": ("gpu", "cpu")}.get(r.layout, (r.layout,))
    report = run_bench(configs, devices, r.steps, r.warmup, ctx, stages=not r.no_stages,
                       echo=click.echo, modes=tuple(mode_list), layouts=layouts)
    click.echo(format_report(report))
    if r.json_path:
        write_json(r.json_path, report)
        click.echo(f"Results written to {r.json_path}")
