"""antimatter15 ``.splat``: no header, 32 bytes per splat (antimatter15/splat ``convert.py``)::

    f32 x y z | f32 scale x y z (linear, exp of the log scales) |
    u8 r g b a (0.5 + SH_C0 * DC, sigmoid(opacity); times 255) |
    u8 quaternion w x y z (unit quaternion * 128 + 128)

Splats are written largest first (exp(sum of log scales) * opacity, as ``convert.py``), which
viewers that stream the file rely on to show the big picture early. The format holds only the
base colour: view-dependent colour (SH degree > 0) is dropped, and it has no place for the render
mode. ``convert.py`` truncates to bytes; this writer rounds to nearest (the same layout, half a
step less error).
"""

from __future__ import annotations

import numpy as np

from ...model import SH_C0, GaussianModel
from ._common import Encoded, ExportError, byte, mode_note, sigmoid, unit_quats

RECORD = np.dtype([("position", "<f4", 3), ("scale", "<f4", 3), ("rgba", "u1", 4),
                   ("rotation", "u1", 4)])
assert RECORD.itemsize == 32


def encode(model: GaussianModel, render_mode: str = "classic") -> Encoded:
    log_scales = np.asarray(model.log_scales, np.float64)
    if log_scales.max() > 88.0:   # exp overflows float32: the file would hold infinity
        raise ExportError(f"log scales up to {log_scales.max():.4g} overflow .splat's float32 "
                          f"linear scales")
    opacity = sigmoid(model.opacity_logits)
    order = np.argsort(-np.exp(log_scales.sum(axis=1)) * opacity, kind="stable")
    rec = np.zeros(model.num, RECORD)
    rec["position"] = model.means[order]
    rec["scale"] = np.exp(log_scales[order])
    rec["rgba"][:, :3] = byte((0.5 + SH_C0 * np.asarray(model.sh[order, 0, :], np.float64)) * 255.0)
    rec["rgba"][:, 3] = byte(opacity[order] * 255.0)
    rec["rotation"] = byte(unit_quats(model.quats[order]) * 128.0 + 128.0)
    notes = mode_note(".splat", render_mode)
    if model.sh_degree > 0:
        notes.append(f".splat holds the base colour only: SH degree {model.sh_degree} "
                     f"(view-dependent colour) dropped")
    return Encoded(rec.tobytes(), order, notes)
