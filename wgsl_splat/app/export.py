"""``export``: a model (PLY) in one of the compact formats web viewers load
(:mod:`wgsl_splat.data.exports`; ``train --export`` runs the same at the end of a run)."""

from __future__ import annotations

import os

import click

from ..data.exports import FORMAT_NAMES, FORMATS
from ..errors import UserError
from .common import DROP_NONFINITE_OPTION, load_model_and_mode

FORMAT_HELP = "; ".join(f"{f.name} ({f.suffix}): {f.title}" for f in FORMATS)


@click.command("export")
@click.argument("model_path", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES), required=True,
              help=f"The format: {FORMAT_HELP}.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Output file (default: MODEL_PATH with the format's suffix). For sog, a path "
                   "ending in meta.json writes the unbundled folder (meta.json + WebP images).")
@click.option("--sh-palette", type=click.IntRange(1, 65536), default=None,
              help="sog only: SH palette entries (default: N/4 as a power of two, 256..8192; "
                   "more is closer to the PLY and slower: docs/exports.md).")
@DROP_NONFINITE_OPTION
def export(model_path, fmt, out_path, sh_palette, drop_nonfinite):
    """Write MODEL_PATH (.ply) as FORMAT: spz, splat, compressed-ply or sog (what each keeps:
    docs/exports.md). The render mode goes along where the format can record it."""
    from ..data.exports import default_export_path, get_format

    fmt = get_format(fmt)
    out_path = out_path or default_export_path(model_path, fmt)
    if sh_palette is not None and fmt.name != "sog":
        raise UserError("--sh-palette applies to --format sog only")
    model, mode = load_model_and_mode(model_path, drop_nonfinite)
    options = {"palette": sh_palette} if sh_palette is not None else {}
    write_export(model, mode, fmt.name, out_path, click.echo, source=model_path, **options)


def write_export(model, mode: str, fmt_name: str, out_path: str, echo, source: str | None = None,
                 **options) -> str:
    """Export ``model`` to ``out_path`` with one line saying what was written (or a one-line
    :class:`UserError`); returns the path."""
    from ..data.exports import ExportError, check_exportable, export_model

    if source and os.path.exists(out_path) and os.path.samefile(out_path, source):
        raise UserError(f"--out {out_path} is the model being exported: choose another file")
    try:   # before the folder is made: a refused model writes nothing
        check_exportable(model)
    except ExportError as exc:
        raise UserError(f"cannot export as {fmt_name}: {exc}") from None
    folder = os.path.dirname(os.path.abspath(out_path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {folder}: {exc.strerror or exc}") from None
    try:
        result = export_model(model, mode, fmt_name, out_path, **options)
    except ExportError as exc:
        raise UserError(f"cannot export as {fmt_name}: {exc}") from None
    except OSError as exc:
        raise UserError(f"cannot write {out_path}: {exc.strerror or exc}") from None
    for note in result.encoded.notes:
        echo(f"note: {note}")
    size = f"{result.num_bytes / 1e6:.2f} MB"
    if source and os.path.isfile(source):
        size += f", {100 * result.num_bytes / os.path.getsize(source):.1f}% of the PLY"
    echo(f"Exported {len(model)} Gaussians ({mode}) as {fmt_name} to {out_path} ({size})")
    return out_path


def export_run(ply_path: str, formats, echo) -> list[str]:
    """``train --export``: the run's final PLY in each format, next to it."""
    from ..data.exports import default_export_path, get_format

    model, mode = load_model_and_mode(ply_path)
    return [write_export(model, mode, name, default_export_path(ply_path, get_format(name)), echo,
                         source=ply_path) for name in dict.fromkeys(formats)]
