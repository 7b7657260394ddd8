"""One image file as a scene: 2D fitting, the image as the one view of a plane."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...camera import Camera
from ..images import IMAGE_EXTENSIONS, read_image_size
from ..scene import SceneFormat, SceneParts, SceneRequest, checked
from ..sources import ImageSource

SINGLE_IMAGE_FOCAL_FACTOR = 10.0  # single-image mode: fx = fy = 10·max(W, H), nearly orthographic


def load(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    """The image ``p`` as the one view of its scene (no point cloud), its folder the root."""
    full, sources = _load_single_image(p)
    return SceneParts(p.parent, "image", full, sources)


FORMAT = SceneFormat("image", lambda p: p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS,
                     load, "an image file")


def _load_single_image(path: Path):
    """2D fitting mode: one camera at the origin (identity pose) looking down +z at the plane
    z = 1, with fx = fy = 10·max(W,H) (nearly orthographic) and the principal point at the image
    centre, so the image fills the view: the plane shows [-W/2f, W/2f] × [-H/2f, H/2f].

    There is no point cloud: the trainer should initialise random points on that plane, e.g.
    uniformly inside :meth:`~wgsl_splat.data.dataset.Dataset.bounds` (a zero-thickness box at
    z = 1) with random colours.
    """
    w, h = checked(read_image_size, path)
    f = SINGLE_IMAGE_FOCAL_FACTOR * max(w, h)
    cam = Camera(np.eye(4), f, f, w / 2, h / 2, w, h, path.name, str(path))
    return [cam], [ImageSource(str(path), w, h, f, f, w / 2, h / 2, None)]
