"""Masks (docs/captures.md): which pixels of a view count in the loss and the metrics.

``masks/`` beside the image folder (COLMAP: beside ``images/``; transforms.json: beside the json,
or a frame's ``mask_path`` as nerfstudio writes it) holds one mask per image under the image's
name, the name with ``.png`` appended, or with its extension replaced by ``.png``; black = left
out of the loss and the metrics. A mask of another size than its image, or masks for only some
images, is an error. The alpha channel of an RGBA photo in a COLMAP scene is a mask too (combined
with a mask file when both exist); transforms.json and Blender scenes keep compositing alpha onto
the background (the NeRF-synthetic convention: there the background is part of the picture).
Masks go through the same undistortion and area downscale as their images; a pixel counts when
its processed mask value is ≥ :data:`MASK_KEEP`. A view whose mask then keeps no pixel is left out
of training and scoring by :meth:`~wgsl_splat.data.dataset.Dataset.preload`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .images import read_image_size, read_mask, resize_area, undistort_image
from .scene import DatasetError, SceneParts, checked, listing
from .sources import ImageSource

MASK_FOLDER = "masks"    # beside images/ (gsplat, Brush, OpenSplat, nerfstudio)
MASK_KEEP = 0.5          # a processed mask value at or above this keeps the pixel


def mask_file(folder: Path, name: str) -> str | None:
    """The mask of image ``name`` (relative to its image folder) in ``folder``: the same name,
    the name + ``.png``, or the name with ``.png`` for its extension."""
    for candidate in (name, name + ".png", str(Path(name).with_suffix(".png"))):
        if (folder / candidate).is_file():
            return str(folder / candidate)
    return None


def in_image_folder(base: Path, image: str) -> str:
    """``image``'s path relative to the folder under ``base`` that holds it (images/x/y.png ->
    x/y.png; a file directly in ``base``: its name)."""
    parts = Path(os.path.relpath(image, base)).parts
    return Path(*parts[1:]).as_posix() if len(parts) > 1 else parts[0]


def check_masks(scene: SceneParts, notes: list) -> None:
    """Every image has a mask of its own size, or none has (one line otherwise)."""
    if scene.mask_origin is None:
        return
    without = [c.name for c, s in zip(scene.cameras, scene.sources) if not s.mask]
    if without:
        raise DatasetError(f"{scene.mask_origin} has masks for {len(scene.sources) - len(without)} "
                           f"of {len(scene.sources)} images; missing for {listing(without)} "
                           "(every image needs one: an all-white mask keeps a whole image)")
    for src in scene.sources:
        size = checked(read_image_size, src.mask)
        if size != (src.width, src.height):
            raise DatasetError(f"mask {src.mask} is {size[0]}x{size[1]} but its image "
                               f"{src.path} is {src.width}x{src.height}")
    notes.append(f"masks from {scene.mask_origin} for all {len(scene.sources)} images: black "
                 "pixels are left out of the loss and the metrics")


def file_mask(src: ImageSource, shape: tuple[int, int]) -> np.ndarray:
    """The pixels ``src``'s mask file keeps in the view of ``shape`` (H, W): the mask undistorted
    and downscaled as its image, then thresholded at :data:`MASK_KEEP`."""
    m = checked(read_mask, src.mask)
    if m.shape != (src.height, src.width):
        raise DatasetError(f"mask {src.mask} is {m.shape[1]}x{m.shape[0]} but its image "
                           f"{src.path} is {src.width}x{src.height}")
    if src.distortion is not None:
        m = undistort_image(m[..., None], src.fx, src.fy, src.cx, src.cy,
                            src.distortion)[..., 0]
    return resize_area(m, *shape) >= MASK_KEEP


def alpha_keep(pixels: np.ndarray) -> np.ndarray:
    """The pixels an RGBA image's processed alpha keeps (uint8 or float ``pixels``)."""
    a = pixels[..., 3]
    a = a.astype(np.float32) / 255.0 if a.dtype == np.uint8 else a
    return a >= MASK_KEEP
