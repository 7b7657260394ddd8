"""Compact splat formats that web viewers load, written from a :class:`GaussianModel`.

One module per format; the registry below declares each format once, and the CLI's choices
(``export --format``, ``train --export``), its help and the table in ``docs/exports.md`` come
from it. Every writer follows the format's published layout and the reference reader named in
``reader`` (the test suite reads every export back with PlayCanvas's ``splat-transform``).

A model exported here is the model of its PLY: an antialiased model's 3D filter is already fused
into its scales and opacities (``data/ply.py``), and a format that can say so records the mode
(SPZ's antialiased flag, SOG's ``model``, compressed PLY's ``SplatRenderMode: mip`` comment) so
that a viewer that knows Mip-Splatting adds the 2D filter; ``.splat`` has no place for it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from dataclasses import dataclass

import numpy as np

from ...atomic_io import atomic_open
from ...model import GaussianModel
from ._common import Encoded, ExportError

__all__ = ["ExportError", "ExportFormat", "ExportResult", "FORMATS", "FORMAT_NAMES", "Encoded",
           "get_format", "check_exportable", "encode_model", "export_model",
           "default_export_path", "format_table"]


@dataclass(frozen=True)
class ExportFormat:
    name: str         # the CLI name
    suffix: str       # the file name ending
    title: str
    keeps: str        # what survives, one line (help and docs)
    spec: str         # the published layout this writer follows
    module: str       # the module in this package with encode(model, render_mode) -> Encoded

    def encode(self, model: GaussianModel, render_mode: str = "classic", **options) -> Encoded:
        mod = importlib.import_module(f".{self.module}", __name__)
        return mod.encode(model, render_mode, **options)


FORMATS = (
    ExportFormat(
        "spz", ".spz", "Niantic SPZ (version 3, gzip)",
        "SH up to degree 3 (5/4 bits), 24-bit fixed-point positions, 8-bit log scales, "
        "smallest-three quaternions; antialiased flag; RUB axes as the spec says",
        "nianticlabs/spz: the SPZ v3 specification and src/cc/load-spz.cc", "spz"),
    ExportFormat(
        "splat", ".splat", "antimatter15 .splat (32 bytes per splat)",
        "float positions and scales, 8-bit colour, opacity and quaternion; no SH (base colour "
        "only), no render mode; largest splats first",
        "antimatter15/splat: convert.py; splat-transform readers/read-splat.ts", "splat"),
    ExportFormat(
        "compressed-ply", ".compressed.ply", "PlayCanvas / SuperSplat compressed PLY",
        "256-splat chunks with float bounds; 11-10-11 bit positions and log scales, "
        "2+3x10 bit quaternions, 8-bit colour and opacity, 8-bit SH; mode comment",
        "playcanvas/splat-transform: writers/compressed-chunk.ts, readers/read-ply.ts", "compressed_ply"),
    ExportFormat(
        "sog", ".sog", "PlayCanvas SOG (version 2: WebP images + meta.json, zipped)",
        "16-bit log-mapped positions, 256-entry codebooks for scales and colours, "
        "8-bit quaternions and opacity, SH as a k-means palette; mode in meta.json; "
        "an --out ending in meta.json writes the unbundled folder",
        "developer.playcanvas.com .../formats/sog/; splat-transform writers/write-sog.ts, readers/read-sog.ts", "sog"),
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)
_BY_NAME = {f.name: f for f in FORMATS}


def format_table() -> str:
    """The Markdown table of the formats (docs/exports.md holds it; a test keeps them equal):
    ``python -m wgsl_splat.data.exports`` prints it."""
    rows = ["| format | file | what it keeps | layout followed |", "|---|---|---|---|"]
    rows += [f"| `{f.name}` | `{f.suffix}` — {f.title} | {f.keeps} | {f.spec} |" for f in FORMATS]
    return "\n".join(rows)


def get_format(name: str) -> ExportFormat:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ExportError(f"unknown export format {name!r}: one of {', '.join(FORMAT_NAMES)}") \
            from None


@dataclass
class ExportResult:
    path: str
    num_bytes: int
    encoded: Encoded


def default_export_path(model_path: str, fmt: ExportFormat) -> str:
    """``scene/point_cloud.ply`` -> ``scene/point_cloud.spz`` (the format's suffix)."""
    stem = model_path[:-4] if model_path.lower().endswith(".ply") else model_path
    return stem + fmt.suffix


def check_exportable(model: GaussianModel) -> None:
    """What every format refuses, as a one-line :class:`ExportError`: a model of no Gaussians
    (checked first: an empty model's arrays do not reshape to rows), or one with NaN or infinite
    values."""
    if model.num == 0:
        raise ExportError("the model has no Gaussians: nothing to export")
    bad = np.zeros(model.num, bool)
    for arr in (model.means, model.log_scales, model.quats, model.sh):
        bad |= ~np.isfinite(arr.reshape(model.num, -1)).all(axis=1)
    bad |= ~np.isfinite(model.opacity_logits)
    if bad.any():
        raise ExportError(f"{int(bad.sum())} of {model.num} Gaussians hold NaN or infinity: "
                          f"export refuses them (drop them when loading: --drop-nonfinite)")


def encode_model(model: GaussianModel, render_mode: str, fmt: str | ExportFormat,
                 **options) -> Encoded:
    """The bytes of ``model`` in ``fmt``; a model the format cannot hold, one of no Gaussians, or
    one with NaN or infinite values, raises :class:`ExportError` (one line)."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    check_exportable(model)
    return fmt.encode(model, render_mode, **options)


def export_model(model: GaussianModel, render_mode: str, fmt: str | ExportFormat, path,
                 **options) -> ExportResult:
    """Encode ``model`` and write it to ``path`` atomically: readers (and a crash) never see a
    half-written file. A SOG ``path`` ending in ``meta.json`` writes the unbundled folder (the
    images first, ``meta.json`` last; the images go again if a later write fails)."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    path = os.fspath(path)
    encoded = encode_model(model, render_mode, fmt, **options)
    if encoded.members is not None and os.path.basename(path) == "meta.json":
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)      # the folder is the export
        written = []
        try:
            for name, data in encoded.members.items():
                if name == "meta.json":
                    continue
                target = os.path.join(folder, name)
                with atomic_open(target) as f:
                    f.write(data)
                written.append(target)
            with atomic_open(path) as f:
                f.write(encoded.members["meta.json"])
        except BaseException:
            for target in written:
                with contextlib.suppress(OSError):
                    os.unlink(target)
            raise
        total = sum(len(d) for d in encoded.members.values())
        return ExportResult(path, total, encoded)
    with atomic_open(path) as f:
        f.write(encoded.data)
    return ExportResult(path, len(encoded.data), encoded)
