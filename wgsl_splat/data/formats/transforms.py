"""The transforms.json format (NeRF, instant-ngp, nerfstudio): a json of frames, each an image
``file_path`` and its camera-to-world ``transform_matrix`` in OpenGL axes (y up, z back; turned
into OpenCV's on load), with intrinsics per file or per frame (``fl_x``/``camera_angle_x``, ``cx``,
``w``, the lens: ``camera_model``, ``k1 k2 [k3 k4] p1 p2``, ``is_fisheye``), optionally
instant-ngp's scene box (``aabb_scale``), nerfstudio's point cloud (``ply_file_path``) and masks
(a frame's ``mask_path``, or ``masks/`` beside the json). Alpha is composited onto the background.

Values are type-checked (a wrong type names the key and the frame or file: ``"is_fisheye":
"false"`` is no flag), and two frames of one image file are refused, as COLMAP's two images of
one name are. :func:`load_transforms` also reads Blender's pair of files
(:mod:`~wgsl_splat.data.formats.blender`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...camera import Camera
from ..dataset import NERF_SYNTHETIC_HALF_SIDE
from ..images import (
    IMAGE_EXTENSIONS,
    Distortion,
    Fisheye,
    FisheyeError,
    fisheye_view,
    read_image_size,
    reason,
)
from ..masks import MASK_FOLDER, in_image_folder, mask_file
from ..scene import (
    DatasetError,
    SceneFormat,
    SceneParts,
    SceneRequest,
    checked,
    finite_points,
    listing,
)
from ..sources import UNDISTORT_HINT, distortion_note, scaled_source, source_size


def transforms_file(p: Path) -> Path | None:
    """The json ``p`` names: ``p`` itself, or the transforms.json in the folder ``p``."""
    if p.is_file() and p.suffix.lower() == ".json":
        return p
    return p / "transforms.json" if p.is_dir() and (p / "transforms.json").is_file() else None


def load(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    """The scene of one json, its masks from the frames' ``mask_path`` or ``masks/`` beside it."""
    path = transforms_file(p)
    full, sources, points, colors, split_hint, aabb = load_transforms([path], notes)
    origin = "mask_path" if any(s.mask for s in sources) else None
    masks = path.parent / MASK_FOLDER
    if origin is None and masks.is_dir():   # nerfstudio layout: images/x.png -> masks/x.png
        origin = f"{MASK_FOLDER}/"
        sources = [replace(s, mask=mask_file(masks, in_image_folder(path.parent, s.path)))
                   for s in sources]
    return SceneParts(path.parent, "nerf", full, sources, points, colors, split_hint, aabb,
                      mask_origin=origin)


FORMAT = SceneFormat("transforms.json", lambda p: transforms_file(p) is not None, load,
                     "a transforms.json or its folder")


_OPENGL_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])
_JSON_KINDS = {bool: "true or false (a JSON boolean)", float: "a finite number",
               int: "a whole number", str: "a string"}


def _typed(value, kind: type, key: str, where: str):
    """``value``, read from key ``key`` of a dataset file, when it has the JSON type ``kind``
    (bool, str, float: a finite number, int: a whole one); None when absent (null). A wrong type
    is a :class:`DatasetError` naming the key and ``where``: ``bool("false")`` is True, so a
    string is never taken for a flag, nor a flag for a number."""
    if value is None:
        return None
    if kind in (float, int):
        try:
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value) and (kind is float or float(value).is_integer()))
        except OverflowError:   # an integer beyond float's range
            ok = False
    else:
        ok = isinstance(value, kind)
    if not ok:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise DatasetError(f"{where}: {key} must be {_JSON_KINDS[kind]}, got {shown}")
    return kind(value) if kind in (float, int) else value


def _file_identity(path: Path):
    """What two spellings of one file share (its inode, else its resolved path)."""
    st = path.stat()
    return (st.st_dev, st.st_ino) if st.st_ino else os.path.normcase(os.path.realpath(path))


def _resolve_frame_path(base: Path, file_path: str) -> Path | None:
    p = base / file_path
    if p.is_file():
        return p
    for ext in IMAGE_EXTENSIONS + tuple(e.upper() for e in IMAGE_EXTENSIONS):
        q = p.with_name(p.name + ext)
        if q.is_file():
            return q
    return None


def _frame_pose(matrix, where: str) -> np.ndarray:
    try:
        m = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        m = np.zeros(0)
    if m.shape == (3, 4):
        m = np.vstack([m, [0, 0, 0, 1]])
    if m.shape != (4, 4) or not np.all(np.isfinite(m)):
        raise DatasetError(f"{where}: transform_matrix must be a finite 4x4 (or 3x4) matrix")
    c2w = m @ _OPENGL_TO_OPENCV  # OpenGL camera axes (y up, z back) -> OpenCV (y down, z forward)
    rot = c2w[:3, :3]
    singular = np.linalg.svd(rot, compute_uv=False)
    if singular[-1] < 1e-6 * max(singular[0], 1e-300):   # all zero, or flattened: no orientation
        raise DatasetError(f"{where}: transform_matrix has a degenerate rotation (singular values "
                           f"{np.array2string(singular, precision=3)})")
    if not np.allclose(rot.T @ rot, np.eye(3), atol=1e-3):
        u, _, vt = np.linalg.svd(rot)
        rot = u @ vt
    if np.linalg.det(rot) <= 0:
        raise DatasetError(f"{where}: transform_matrix is not a rotation (mirrored axes)")
    w2c = np.eye(4)
    w2c[:3, :3] = rot.T
    w2c[:3, 3] = -rot.T @ c2w[:3, 3]
    return w2c


def _ngp_aabb(meta: dict, where: str) -> np.ndarray | None:
    """instant-ngp's scene box in the transforms' frame: ngp = nerf·scale + offset, and the box is
    0.5 ± aabb_scale/2 in ngp units (defaults scale 0.33, offset 0.5)."""
    aabb_scale = _typed(meta.get("aabb_scale"), float, "aabb_scale", where)
    if aabb_scale is None:
        return None
    scale = _typed(meta.get("scale"), float, "scale", where)
    scale = 0.33 if scale is None else scale
    if scale == 0:
        raise DatasetError(f"{where}: scale must not be 0")
    offset = meta.get("offset")
    if isinstance(offset, list) and len(offset) == 3:
        offset = np.array([_typed(v, float, "offset", where) for v in offset], dtype=np.float64)
    elif offset is not None:
        offset = _typed(offset, float, "offset (a number or a list of 3)", where)
    offset = np.broadcast_to(np.asarray(0.5 if offset is None else offset, np.float64), (3,))
    half = 0.5 * aabb_scale / scale
    centre = (0.5 - offset) / scale
    return np.stack([centre - half, centre + half])


def _read_point_cloud(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """xyz (float64) and colours (float32 in [0,1], grey when absent) of a PLY's vertices."""
    from ..ply import (  # the generic PLY vertex reader
        PlyError,
        _read_header,
        _read_vertices,
    )

    try:
        with open(path, "rb") as f:
            fmt, elements = _read_header(f)
            cols = _read_vertices(f, fmt, elements)
    except (OSError, PlyError) as exc:
        raise DatasetError(f"cannot read point cloud {path}: {reason(exc)}") from None
    if not all(k in cols for k in "xyz"):
        raise DatasetError(f"point cloud {path} has no x/y/z vertex properties")
    xyz = np.stack([cols[k] for k in "xyz"], axis=1).astype(np.float64)
    if all(k in cols for k in ("red", "green", "blue")):
        rgb = np.stack([cols[k] for k in ("red", "green", "blue")], axis=1).astype(np.float32)
        rgb = rgb / (255.0 if rgb.max(initial=0) > 1 else 1.0)
    else:
        rgb = np.full_like(xyz, 0.5, dtype=np.float32)
    return (xyz, rgb) if len(xyz) else None


def load_transforms(json_paths: list[Path], notes: list[str], synthetic: bool = False):
    """Cameras, sources, point cloud, split hint (image path -> the file's split, when several
    files) and scene box of the frames of ``json_paths``, merged; ``synthetic``: a Blender scene
    (its note on random initialisation)."""
    cams, sources, missing, split_of, aabb = [], [], [], {}, None
    cloud = None
    seen: dict = {}   # file identity -> (where, file_path, pose) of the frame that uses it
    for jp in json_paths:
        try:
            meta = json.loads(jp.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise DatasetError(f"cannot read {jp}: {reason(exc)}") from None
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{jp}: invalid JSON ({exc})") from None
        frames = meta.get("frames") if isinstance(meta, dict) else None
        if not isinstance(frames, list) or not frames:
            raise DatasetError(f"{jp}: no 'frames' list")
        aabb = _ngp_aabb(meta, jp.name) if aabb is None else aabb
        ply_file = _typed(meta.get("ply_file_path"), str, "ply_file_path", jp.name)
        if cloud is None and ply_file:  # nerfstudio exports its SfM points
            cloud = _read_point_cloud(jp.parent / ply_file)
            if cloud is None:
                notes.append(f"empty point cloud {ply_file}: random initialisation")
            else:
                xyz, rgb = finite_points(*cloud, ply_file, notes)
                cloud = None if xyz is None else (xyz, rgb)
        for i, frame in enumerate(frames):
            where = f"{jp.name} frame {i}"
            if not isinstance(frame, dict) or frame.get("file_path") is None:
                raise DatasetError(f"{where}: no file_path")
            file_path = _typed(frame["file_path"], str, "file_path", where)
            path = _resolve_frame_path(jp.parent, file_path)
            if path is None:
                missing.append(file_path)
                continue
            w2c = _frame_pose(frame.get("transform_matrix"), where)
            _check_not_seen(seen, _file_identity(path), (where, file_path, w2c), path, json_paths)
            cam, src = _transforms_camera(meta, frame, path, w2c, where, jp.name)
            mask_path = _typed(frame.get("mask_path"), str, "mask_path", where)
            if mask_path:   # nerfstudio: a mask per frame, relative to the json
                mask = jp.parent / mask_path
                if not mask.is_file():
                    raise DatasetError(f"{where}: mask_path {mask_path} does not exist")
                src = replace(src, mask=str(mask))
            cams.append(cam)
            sources.append(src)
            split_of[str(path)] = "test" if jp.name == "transforms_test.json" else "train"
    if missing:
        raise DatasetError(f"{len(missing)} images referenced by "
                           f"{' + '.join(p.name for p in json_paths)} are missing: "
                           f"{listing(missing)}")
    base = json_paths[0].parent
    if len({c.name for c in cams}) < len(cams):  # e.g. Blender's train/r_0.png and test/r_0.png
        for c in cams:
            c.name = Path(os.path.relpath(c.image_path, base)).as_posix()
    note = distortion_note(sources, "transforms.json")
    if note:
        notes.append(note)
    if len(json_paths) > 1:
        notes.append("merged " + " + ".join(p.name for p in json_paths))
    if cloud is None:
        if synthetic:
            notes.append(f"no point cloud: initialise randomly in the cube ±{NERF_SYNTHETIC_HALF_SIDE} "
                         "(NeRF-synthetic, as 3DGS)")
        else:
            notes.append("no point cloud: initialise randomly inside bounds() (the region the cameras "
                         "look at" + (", within the aabb_scale box)" if aabb is not None else ")"))
    hint = split_of if len(json_paths) > 1 else None
    points, colors = cloud if cloud is not None else (None, None)
    return cams, sources, points, colors, hint, aabb


def _check_not_seen(seen: dict, key, frame: tuple, path: Path, json_paths: list[Path]) -> None:
    """Refuse a second frame of one image file (``seen``: the frames so far by file identity):
    with two poses either one is wrong; listed twice it trains twice and is scored once. The
    frames and both spellings are named (COLMAP's own case:
    :mod:`~wgsl_splat.data.formats.colmap`)."""
    if key not in seen:
        seen[key] = frame
        return
    (first, first_path, first_pose), (where, file_path, pose) = seen[key], frame
    spelled = (repr(file_path) if file_path == first_path
               else f"{first_path!r} and {file_path!r}")
    shown = Path(os.path.relpath(path, json_paths[0].parent)).as_posix()
    files = " + ".join(p.name for p in json_paths)
    if np.allclose(pose, first_pose, rtol=0, atol=1e-9):
        raise DatasetError(f"{first} and {where} both list the image {shown} ({spelled}): a frame "
                           f"listed twice is trained twice and scored once; remove one from "
                           f"{files}")
    raise DatasetError(f"{first} and {where} both use the image {shown} ({spelled}) with "
                       f"different poses: each frame needs its own image file; fix or re-export "
                       f"{files}")


def _transforms_camera(meta: dict, frame: dict, path: Path, w2c: np.ndarray, where: str,
                       file_where: str):
    def get(key, kind, default=None):   # the frame's value, else the file's; type-checked
        here = frame.get(key) is not None
        value = _typed(frame[key] if here else meta.get(key), kind, key,
                       where if here else file_where)
        return default if value is None else value

    def focal(key, side):   # from a field of view, in radians
        angle = get(key, float)
        if not 0 < angle < math.pi:
            raise DatasetError(f"{where}: {key} must be an angle in radians between 0 and pi, "
                               f"got {angle:g}")
        return 0.5 * side / math.tan(0.5 * angle)

    model = get("camera_model", str, "OPENCV").upper()
    fisheye = model == "OPENCV_FISHEYE" or get("is_fisheye", bool, False)
    if model not in ("OPENCV", "OPENCV_FISHEYE", "PINHOLE", "SIMPLE_PINHOLE"):
        raise DatasetError(f"{where}: camera model {model} is not supported; convert the images "
                           f"to a pinhole camera first (for a COLMAP source: {UNDISTORT_HINT})")
    size = checked(read_image_size, path)
    width, height = get("w", int, size[0]), get("h", int, size[1])
    if get("fl_x", float) is not None:
        fx = get("fl_x", float)
    elif get("camera_angle_x", float) is not None:
        fx = focal("camera_angle_x", width)
    else:
        raise DatasetError(f"{where}: no focal length (fl_x or camera_angle_x)")
    if get("fl_y", float) is not None:
        fy = get("fl_y", float)
    elif get("camera_angle_y", float) is not None and get("fl_x", float) is None:
        fy = focal("camera_angle_y", height)
    else:
        fy = fx
    cx, cy = get("cx", float, width / 2), get("cy", float, height / 2)
    ks = tuple(get(k, float, 0.0) for k in ("k1", "k2", "k3", "k4"))
    dist = None if fisheye else Distortion(ks, get("p1", float, 0.0), get("p2", float, 0.0))
    if fisheye:   # p1, p2 are no part of the fisheye model
        try:
            dist = fisheye_view(ks, width, height, fx, fy, cx, cy)
        except FisheyeError as exc:
            raise DatasetError(f"{where}: {exc}") from None
    elif dist.is_identity:
        dist = None
    ws, hs = source_size(path, width, height, "the camera in transforms.json", size)
    view = dist.scale if isinstance(dist, Fisheye) else 1.0   # the pinhole view's focal
    try:
        cam = Camera(w2c, fx * view, fy * view, cx, cy, width, height, path.name, str(path))
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    return cam, scaled_source(path, ws, hs, width, height, fx, fy, cx, cy, dist)
