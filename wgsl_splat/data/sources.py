"""Where a camera's pixels come from (:class:`ImageSource`) and how a format describes it: the
file's size against the camera's, the intrinsics at the file's size, the note on undistortion,
and the ``-r`` check.

- Lens distortion (transforms.json ``k1 k2 [k3 k4] p1 p2``; COLMAP ``SIMPLE_RADIAL``, ``RADIAL``,
  ``OPENCV``, ``FULL_OPENCV``) is removed on load: each pixel of an undistorted pinhole image with
  the *same* intrinsics samples the source bilinearly at its forward-distorted position (exact, no
  iterative inversion). The few output pixels whose source lies outside the photo take the nearest
  edge pixel. Fisheye lenses (COLMAP ``OPENCV_FISHEYE``, ``SIMPLE_RADIAL_FISHEYE``,
  ``RADIAL_FISHEYE``; transforms.json ``camera_model: OPENCV_FISHEYE`` or ``is_fisheye``) are
  undistorted the same way to a pinhole view of the same size and principal point whose focal
  length is chosen so that the view is as wide as it can be with every pixel inside the photo
  (:func:`~wgsl_splat.data.images.fisheye_view`; the note says how much of the photo it keeps).
  Other models are refused with the ``colmap image_undistorter`` hint (:data:`UNDISTORT_HINT`).
- A file may be an exact downscale of the camera it belongs to; its source then carries the
  intrinsics at the file's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .images import (
    Distortion,
    Fisheye,
    fisheye_kept_fraction,
    max_outside_pixels,
    read_image_size,
)
from .scene import DatasetError, checked, listing

UNDISTORT_HINT = ("undistort the scene first: colmap image_undistorter --image_path images "
                  "--input_path sparse/0 --output_path undistorted, then train on undistorted/")
MIN_DOWNSCALED_SIDE = 8  # px: -r may not shrink an image below this (1x1 images train silently)


@dataclass(frozen=True)
class ImageSource:
    """Where a camera's pixels come from: the file, its actual size, and the intrinsics and
    distortion at that size (only used to undistort)."""

    path: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: Distortion | None = None
    mask: str | None = None   # the mask file (same size as the image), None: no mask file


def check_downscale(resolution: float, sizes) -> None:
    """Refuse a ``-r`` that shrinks one of the images (``(width, height)`` pairs) below
    :data:`MIN_DOWNSCALED_SIDE` pixels on a side (images already that small are left alone)."""
    if resolution <= 1:
        return
    w, h = min(sizes, key=min)
    scaled = (max(1, int(round(w / resolution))), max(1, int(round(h / resolution))))
    if min(scaled) < MIN_DOWNSCALED_SIDE:
        largest = max(1, int(min(w, h) / (MIN_DOWNSCALED_SIDE - 0.5)))
        raise DatasetError(f"-r {resolution:g} would shrink the {w}x{h} images to "
                           f"{scaled[0]}x{scaled[1]} px; at most -r {largest} keeps them "
                           f"{MIN_DOWNSCALED_SIDE} px on a side")


def source_size(path: Path, width: int, height: int, what: str,
                 size: tuple[int, int] | None = None) -> tuple[int, int]:
    """The file's size (``size`` if already read), checked against the camera's: equal, or an
    exact downscale of it."""
    ws, hs = size or checked(read_image_size, path)
    if (ws, hs) == (width, height):
        return ws, hs
    for k in (width / ws, height / hs):
        if k > 1 and (round(width / k), round(height / k)) == (ws, hs):
            return ws, hs
    raise DatasetError(f"image {path} is {ws}x{hs} but {what} is {width}x{height} "
                       "(nor is the image an exact downscale of it)")


def scaled_source(path, ws, hs, width, height, fx, fy, cx, cy, dist) -> ImageSource:
    sx, sy = ws / width, hs / height
    return ImageSource(str(path), ws, hs, fx * sx, fy * sy, cx * sx, cy * sy, dist)


def distortion_note(sources: list[ImageSource], what: str) -> str | None:
    """The note saying which sources are undistorted on load and what it costs them (None when
    none is); ``what`` names where their lens models came from."""
    fisheye = {(s.width, s.height, s.fx, s.fy, s.cx, s.cy, s.distortion): s for s in sources
               if isinstance(s.distortion, Fisheye)}
    if fisheye:
        kept = [fisheye_kept_fraction(*key) for key in fisheye]
        fov = [np.rad2deg(2 * np.arctan(0.5 * w / (fx * d.scale))) for w, _, fx, _, _, _, d in fisheye]
        n = sum(isinstance(s.distortion, Fisheye) for s in sources)
        return (f"undistorting {n} fisheye images to pinhole views on load ({what}): the widest "
                f"view with every pixel inside the photo, horizontal field of view "
                f"{min(fov):.0f}°{'' if max(fov) - min(fov) < 0.5 else f'–{max(fov):.0f}°'}, "
                f"keeping {100 * min(kept):.0f}%"
                f"{'' if max(kept) - min(kept) < 0.005 else f'–{100 * max(kept):.0f}%'} of the "
                f"photo's area (the corners beyond it are cropped) at focal length ×"
                f"{min(d.scale for *_, d in fisheye):.2f} (the centre's sampling)")
    distorted = [s for s in sources if s.distortion is not None]
    if not distorted:
        return None
    outside = max(max_outside_pixels(s.width, s.height, s.fx, s.fy, s.cx, s.cy, s.distortion)
                  for s in {(s.width, s.height, s.fx, s.fy, s.cx, s.cy, s.distortion): s
                            for s in distorted}.values())
    kinds = sorted({s.distortion.describe() for s in distorted})
    return (f"undistorting {len(distorted)} images on load ({what}: {listing(kinds, 2)}; same "
            f"pinhole intrinsics, up to {outside:.1f} px at the borders edge-clamped)")
