"""Load training scenes: COLMAP sparse models, NeRF/instant-ngp ``transforms.json``, the Blender
layout, single images.

:func:`load_dataset` finds the format of ``path`` in :data:`SCENE_FORMATS` and, from what that
format reads (:class:`~wgsl_splat.data.scene.SceneParts`), builds the :class:`Dataset`: the shared
checks (masks, ``-r``), the cameras sorted by name and scaled to the resolution, the split
(:mod:`~wgsl_splat.data.split`) and the cache of processed images.

The pieces, one concern each: :mod:`~wgsl_splat.data.scene` (what a format is given and returns,
:class:`DatasetError`), :mod:`~wgsl_splat.data.formats` (one module per format),
:mod:`~wgsl_splat.data.sources` (image sources, undistortion), :mod:`~wgsl_splat.data.masks`,
:mod:`~wgsl_splat.data.split`, :mod:`~wgsl_splat.data.dataset` (the loaded scene, its images).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from .colmap_model import find_model
from .dataset import Dataset
from .formats import blender, colmap, image, transforms
from .images import IMAGE_EXTENSIONS, ImageCache, user_cache_root
from .masks import check_masks
from .scene import DatasetError, SceneFormat, SceneRequest
from .sources import ImageSource, check_downscale
from .split import split_views

__all__ = ["Dataset", "DatasetError", "ImageSource", "SCENE_FORMATS", "load_dataset",
           "scene_formats_text"]

#: The formats :func:`load_dataset` reads, tried in this order (a folder with both a COLMAP model
#: and a transforms.json is read as COLMAP). Adding a format is a module in data/formats/ and its
#: entry here.
SCENE_FORMATS: list[SceneFormat] = [colmap.FORMAT, transforms.FORMAT, blender.FORMAT, image.FORMAT]


def scene_formats_text() -> str:
    """The formats as the CLI's help and errors list them, from :data:`SCENE_FORMATS`."""
    return ", ".join(f.what for f in SCENE_FORMATS)


def _not_a_scene(p: Path) -> str:
    """Why ``p`` is no scene of any format (one line)."""
    from .sfm import sfm_input_kind

    if sfm_input_kind(p) is not None:
        return (f"{p} is a {'video' if p.is_file() else 'folder of photos'} without camera poses: "
                f"`wgsl_splat train {p}` or `wgsl_splat sfm {p} --out SCENE` computes them")
    if p.is_file():
        return (f"{p} is neither an image ({', '.join(IMAGE_EXTENSIONS)}) nor a transforms.json")
    if p.is_dir() and find_model(p):
        return (f"{p} is a COLMAP model folder; pass the scene folder that holds sparse/ and "
                "images/ instead")
    if p.is_dir():
        return f"{p} is not a dataset: expected one of: {scene_formats_text()}"
    return f"{p} is neither a file nor a folder"


def load_dataset(path, *, resolution: float = 1, eval_split: bool = False,
                 background=(0.0, 0.0, 0.0), cache_dir=None, images: str = "images") -> Dataset:
    """Load the scene at ``path``: a folder with ``sparse/0/`` or ``sparse/`` (COLMAP, photos in
    ``images/`` or the folder named by ``images``), a ``transforms.json`` (or Blender's
    ``transforms_train.json`` + ``transforms_test.json``, merged) or its folder, or one image file.

    ``resolution``: downscale factor ≥ 1. ``eval_split``: cameras sorted by name, every 8th
    (i % 8 == 0) is a test view; a Blender layout keeps its own train/test files instead (as 3DGS).
    ``cache_dir``: root of the processed-image cache (default ``<scene>/.wgsl_splat_cache``).
    Raises :class:`DatasetError` with a one-line message for anything unusable.
    """
    try:
        resolution = float(resolution)
    except (TypeError, ValueError):
        raise DatasetError(f"resolution must be a number, got {resolution!r}") from None
    if not math.isfinite(resolution) or resolution < 1:
        raise DatasetError(f"resolution must be a downscale factor >= 1, got {resolution:g}")
    bg = np.asarray(background, dtype=np.float32).ravel()
    if bg.shape != (3,):
        raise DatasetError(f"background must have 3 values, got {list(bg)}")

    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetError(f"dataset path does not exist: {p}")
    notes: list[str] = []
    fmt = next((f for f in SCENE_FORMATS if f.detect(p)), None)
    if fmt is None:
        raise DatasetError(_not_a_scene(p))
    scene = fmt.load(p, SceneRequest(images=images, background=bg), notes)
    root, kind, full, sources = scene.root, scene.kind, scene.cameras, scene.sources
    points, colors, split_hint, aabb = scene.points, scene.colors, scene.split_hint, scene.aabb
    synthetic = scene.synthetic
    if not full:
        raise DatasetError(f"{p}: the dataset has no cameras")
    check_masks(scene, notes)
    check_downscale(resolution, [(c.width, c.height) for c in full])
    order = sorted(range(len(full)), key=lambda i: full[i].name)
    cameras = [full[i].scaled(resolution) for i in order]
    sources = [sources[i] for i in order]
    train, test = split_views(cameras, kind, eval_split, split_hint, notes)

    processed = any(s.distortion is not None or (s.width, s.height) != (c.width, c.height)
                    for s, c in zip(sources, cameras))
    cache = None
    if processed:
        label = f"r{resolution:g}"
        if cache_dir is not None:
            cache = ImageCache([Path(cache_dir).expanduser() / label])
            if cache.directory is None:
                raise DatasetError(f"cache folder {cache_dir} is not writable")
        else:
            digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:10]
            fallback = user_cache_root() / f"{root.resolve().name or 'scene'}-{digest}" / label
            cache = ImageCache([root / ".wgsl_splat_cache" / label, fallback])
    return Dataset(cameras, points, colors, train, test, bg, kind, notes, str(root), resolution,
                   aabb, synthetic, sources, cache, alpha_mask=kind == "colmap")
