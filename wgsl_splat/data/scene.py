"""What a scene format's loader is given and returns, and the error it raises.

A format (one module of :mod:`wgsl_splat.data.formats`) is a :class:`SceneFormat`: it says
whether a path holds a scene of its kind and reads one into :class:`SceneParts`; everything after
that (downscaling, the cache, the split, the checks) is shared (:func:`~wgsl_splat.data.datasets.load_dataset`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .images import ImageReadError

_MAX_LISTED = 5


class DatasetError(ValueError):
    """The scene cannot be loaded; the message is one readable line, meant for the user."""


def checked(fn, path):
    """``fn(path)`` with image errors turned into :class:`DatasetError`."""
    try:
        return fn(path)
    except ImageReadError as exc:
        raise DatasetError(str(exc)) from None


def listing(items, limit: int = _MAX_LISTED) -> str:
    items = list(items)
    more = f", … ({len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(str(i) for i in items[:limit]) + more


@dataclass
class SceneRequest:
    """What a format's loader is asked for besides the path: the folder of the photos (COLMAP) and
    the background a synthetic scene is composited on."""

    images: str = "images"
    background: np.ndarray = field(default_factory=lambda: np.zeros(3, np.float32))


@dataclass
class SceneParts:
    """What a format's loader returns: its cameras at full resolution (OpenCV convention,
    docs/design.md §2) with their image sources, in any order (they are sorted by name), an
    optional point cloud, the format's own train/test split (``split_hint``: view names per split;
    None: every 8th view), the scene's box where the format gives one, whether it is synthetic
    (Blender)."""

    root: Path
    kind: str
    cameras: list
    sources: list
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    split_hint: dict | None = None
    aabb: np.ndarray | None = None
    synthetic: bool = False
    mask_origin: str | None = None   # where the sources' masks came from (messages), None: none


@dataclass(frozen=True)
class SceneFormat:
    """A scene format: ``detect(path)`` says whether ``path`` holds one, ``load(path, request,
    notes)`` reads it (:class:`SceneParts`; :class:`DatasetError` with one line for anything
    unusable; ``notes`` collects what the user should know). The downscaling, the cache, the
    split and the checks are shared by every format (:func:`~wgsl_splat.data.datasets.load_dataset`)."""

    name: str
    detect: Callable[[Path], bool]
    load: Callable[[Path, SceneRequest, list], SceneParts]
    what: str   # what the user passes, for the CLI's help and the "not a dataset" error


def finite_points(xyz: np.ndarray, rgb: np.ndarray, what: str, notes: list[str]):
    """The point cloud without its rows that hold NaN or infinity (a note says how many went);
    ``(None, None)`` when nothing is left (random initialisation)."""
    ok = np.all(np.isfinite(xyz), axis=1) & np.all(np.isfinite(rgb), axis=1)
    if ok.all():
        return xyz, rgb
    notes.append(f"dropped {int((~ok).sum())} of {len(ok)} points of {what} with non-finite "
                 f"values" + ("" if ok.any() else ": initialise randomly inside the bounds"))
    return (xyz[ok], rgb[ok]) if ok.any() else (None, None)
