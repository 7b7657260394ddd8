"""The COLMAP scene format: a folder with a sparse model in ``sparse/0/`` or ``sparse/`` (binary or
text, read by :mod:`wgsl_splat.data.colmap_model`), its photos in ``images/`` (or the folder the
request names) and optionally ``masks/`` beside them (:mod:`~wgsl_splat.data.masks`).

Each registered image becomes a camera; COLMAP's camera models become pinhole intrinsics and the
lens distortion removed on load (:mod:`~wgsl_splat.data.sources`); unregistered photos are
skipped with a note; the model's points are the point cloud. An RGBA photo's alpha is a mask.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...camera import Camera
from ..colmap_model import ColmapError, find_model, read_model
from ..images import IMAGE_EXTENSIONS, Distortion, Fisheye, FisheyeError, fisheye_view
from ..masks import MASK_FOLDER, mask_file
from ..scene import (
    DatasetError,
    SceneFormat,
    SceneParts,
    SceneRequest,
    finite_points,
    listing,
)
from ..sources import UNDISTORT_HINT, distortion_note, scaled_source, source_size


def model_of(p: Path):
    """``(model folder, extension)`` of the scene folder ``p``'s sparse model, None without one."""
    return (find_model(p / "sparse" / "0") or find_model(p / "sparse")) if p.is_dir() else None


def load(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    """The scene at ``p``, its masks from ``masks/`` beside the photos' folder."""
    full, sources, points, colors = _load_colmap(p, model_of(p), p / req.images, notes)
    masks = (p / req.images).parent / MASK_FOLDER
    if masks.is_dir():
        sources = [replace(s, mask=mask_file(masks, c.name)) for c, s in zip(full, sources)]
    return SceneParts(p, "colmap", full, sources, points, colors,
                      mask_origin=f"{MASK_FOLDER}/" if masks.is_dir() else None)


FORMAT = SceneFormat("colmap", lambda p: model_of(p) is not None, load,
                     "a COLMAP folder (sparse/0/ or sparse/ with cameras/images .bin or .txt)")


def _fisheye(k, cam, fx, fy, cx, cy, where: str) -> Fisheye:
    try:
        return fisheye_view(k, cam.width, cam.height, fx, fy, cx, cy)
    except FisheyeError as exc:
        raise DatasetError(f"{where}: {exc}") from None


def _colmap_intrinsics(cam) -> tuple[float, float, float, float, Distortion | Fisheye | None]:
    p = [float(v) for v in cam.params]
    where = f"camera {cam.id} ({cam.model})"
    if cam.model == "OPENCV_FISHEYE":
        return p[0], p[1], p[2], p[3], _fisheye(p[4:8], cam, *p[:4], where)
    if cam.model == "SIMPLE_RADIAL_FISHEYE":
        return p[0], p[0], p[1], p[2], _fisheye(p[3:4], cam, p[0], p[0], p[1], p[2], where)
    if cam.model == "RADIAL_FISHEYE":
        return p[0], p[0], p[1], p[2], _fisheye(p[3:5], cam, p[0], p[0], p[1], p[2], where)
    if cam.model == "SIMPLE_PINHOLE":
        return p[0], p[0], p[1], p[2], None
    if cam.model == "PINHOLE":
        return p[0], p[1], p[2], p[3], None
    if cam.model == "SIMPLE_RADIAL":
        return p[0], p[0], p[1], p[2], Distortion((p[3],))
    if cam.model == "RADIAL":
        return p[0], p[0], p[1], p[2], Distortion((p[3], p[4]))
    if cam.model == "OPENCV":
        return p[0], p[1], p[2], p[3], Distortion((p[4], p[5]), p[6], p[7])
    if cam.model == "FULL_OPENCV":
        return p[0], p[1], p[2], p[3], Distortion((p[4], p[5], p[8]), p[6], p[7], tuple(p[9:12]))
    raise DatasetError(f"camera {cam.id} uses the {cam.model} model, which wgsl_splat cannot "
                       f"undistort; {UNDISTORT_HINT}")


def _load_colmap(root: Path, model: tuple[str, str], images_dir: Path, notes: list[str]):
    model_dir, fmt = model
    try:
        m = read_model(model_dir, fmt)
    except ColmapError as exc:
        raise DatasetError(str(exc)) from None
    rel_model = os.path.relpath(model_dir, root)
    if not images_dir.is_dir():
        raise DatasetError(f"{root}: COLMAP model found but no image folder {images_dir.name}/")
    registered = sorted(m.images.values(), key=lambda im: im.name)
    if not registered:
        raise DatasetError(f"{model_dir}: the COLMAP model has no registered images")
    # Two poses for one file: training on either would be silently wrong (the other image would
    # look unregistered), so the model is refused.
    for a, b in zip(registered, registered[1:]):
        if a.name == b.name:
            raise DatasetError(f"{rel_model}: images {a.id} and {b.id} are both named {a.name!r}: "
                               f"each registered image needs its own file; fix or re-export the "
                               f"COLMAP model")
    missing = [im.name for im in registered if not (images_dir / im.name).is_file()]
    if missing:
        raise DatasetError(f"{len(missing)} of {len(registered)} images registered in "
                           f"{rel_model} are missing from {images_dir}: {listing(missing)}")
    unregistered = sorted(set(_list_images(images_dir)) - {im.name for im in registered})
    if unregistered:
        notes.append(f"skipped {len(unregistered)} unregistered images (no pose in {rel_model}): "
                     f"{listing(unregistered)}")
    cams, sources = [], []
    for im in registered:
        if im.camera_id not in m.cameras:
            raise DatasetError(f"image {im.name} refers to camera {im.camera_id}, which "
                               f"{rel_model} does not define")
        c = m.cameras[im.camera_id]
        fx, fy, cx, cy, dist = _colmap_intrinsics(c)
        if dist is not None and dist.is_identity:
            dist = None
        path = images_dir / im.name
        ws, hs = source_size(path, c.width, c.height, f"its camera {c.id} ({c.model})")
        view = dist.scale if isinstance(dist, Fisheye) else 1.0   # the pinhole view's focal
        try:
            cams.append(Camera(im.world_to_camera, fx * view, fy * view, cx, cy, c.width,
                               c.height, im.name, str(path)))
        except ValueError as exc:
            raise DatasetError(f"image {im.name}, camera {c.id}: {exc}") from None
        sources.append(scaled_source(path, ws, hs, c.width, c.height, fx, fy, cx, cy, dist))
    used = {m.cameras[im.camera_id].model for im in registered} - {"PINHOLE", "SIMPLE_PINHOLE"}
    note = distortion_note(sources, "COLMAP " + "/".join(sorted(used)))
    if note:
        notes.append(note)
    points = colors = None
    if m.points is None:
        notes.append(f"no points3D file in {rel_model}: initialise randomly inside the bounds")
    elif len(m.points.xyz) == 0:
        notes.append(f"empty point cloud in {rel_model}: initialise randomly inside the bounds")
    else:
        points, colors = finite_points(m.points.xyz.astype(np.float64),
                                       m.points.rgb.astype(np.float32) / 255.0, rel_model, notes)
    return cams, sources, points, colors


def _list_images(folder: Path) -> list[str]:
    """Image files under ``folder`` (recursive, hidden folders skipped), as relative posix paths."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(folder)
        found += [(rel / f).as_posix() for f in filenames
                  if os.path.splitext(f)[1].lower() in IMAGE_EXTENSIONS]
    return sorted(found)
