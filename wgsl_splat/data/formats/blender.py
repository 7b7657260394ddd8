"""The Blender layout of NeRF-synthetic scenes: ``transforms_train.json`` + ``transforms_test.json``
in one folder, read as transforms.json (:mod:`~wgsl_splat.data.formats.transforms`) and merged.
The test file is the held-out split (as 3DGS); the scene is synthetic: random initialisation in
3DGS's cube, and RGBA images composited onto the background.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..images import image_has_alpha
from ..scene import DatasetError, SceneFormat, SceneParts, SceneRequest, checked
from ..sources import ImageSource
from .transforms import load_transforms


def blender_files(p: Path) -> list[Path]:
    """The folder ``p``'s train and test files (either may be missing), none for a file."""
    return [p / f"transforms_{s}.json" for s in ("train", "test")] if p.is_dir() else []


def load(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    """Both files' frames, the split theirs; a background colour needs RGBA images."""
    train, test = blender_files(p)
    if not train.is_file():
        raise DatasetError(f"{test} has no transforms_train.json beside it: a Blender scene trains "
                           "on transforms_train.json and evaluates on transforms_test.json")
    full, sources, points, colors, split_hint, aabb = load_transforms(
        [b for b in (train, test) if b.is_file()], notes, synthetic=True)
    if np.any(req.background != 0):
        _require_alpha(sources, req.background)
    return SceneParts(p, "nerf", full, sources, points, colors, split_hint, aabb, synthetic=True)


FORMAT = SceneFormat("blender", lambda p: any(b.is_file() for b in blender_files(p)), load,
                     "a Blender scene (transforms_train.json + _test.json)")


def _require_alpha(sources: list[ImageSource], background: np.ndarray) -> None:
    """A synthetic (Blender) scene is composited on the background at load: its images must carry
    the alpha channel that says where the object is (one header read per image)."""
    for src in sources:
        if not checked(image_has_alpha, src.path):
            raise DatasetError(f"image {src.path} has no alpha channel: a Blender-layout scene is "
                               f"RGBA, composited on the background ({', '.join(f'{c:g}' for c in background)}) "
                               "when loaded; use the RGBA originals, or train without a background colour")
