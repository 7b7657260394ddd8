"""Readers for COLMAP sparse models in both the binary (``.bin``) and text (``.txt``) formats.

Pure parsing with ``struct``/NumPy, no dependency on COLMAP. Layouts follow COLMAP's
``src/colmap/scene/reconstruction_io.cc``; poses are world-to-camera with quaternions w,x,y,z and
COLMAP's pixel convention (the centre of the top-left pixel is (0.5, 0.5)), as in docs/design.md §2.
:mod:`wgsl_splat.data.formats.colmap` turns a model into a scene's cameras; this module knows
nothing about images.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CAMERA_MODELS", "ColmapCamera", "ColmapImage", "ColmapPoints", "ColmapModel",
           "ColmapError", "find_model", "read_model", "qvec_to_rotmat"]

# model id -> (name, number of parameters), as in COLMAP's camera_models.h.
CAMERA_MODELS = {
    0: ("SIMPLE_PINHOLE", 3), 1: ("PINHOLE", 4), 2: ("SIMPLE_RADIAL", 4), 3: ("RADIAL", 5),
    4: ("OPENCV", 8), 5: ("OPENCV_FISHEYE", 8), 6: ("FULL_OPENCV", 12), 7: ("FOV", 5),
    8: ("SIMPLE_RADIAL_FISHEYE", 4), 9: ("RADIAL_FISHEYE", 5), 10: ("THIN_PRISM_FISHEYE", 12),
    11: ("RAD_TAN_THIN_PRISM_FISHEYE", 16),
}
_MODEL_IDS = {name: (mid, n) for mid, (name, n) in CAMERA_MODELS.items()}
_FILES = ("cameras", "images", "points3D")


class ColmapError(ValueError):
    """A COLMAP model file is missing, truncated or malformed (one readable line)."""


@dataclass
class ColmapCamera:
    id: int
    model: str
    width: int
    height: int
    params: np.ndarray  # float64, meaning depends on ``model``


@dataclass
class ColmapImage:
    id: int
    qvec: np.ndarray       # (4,) w,x,y,z world-to-camera rotation
    tvec: np.ndarray       # (3,) world-to-camera translation
    camera_id: int
    name: str              # path relative to the images folder
    xys: np.ndarray        # (K,2) float64 keypoint positions in pixels
    point3d_ids: np.ndarray  # (K,) int64, -1 where the keypoint has no 3D point

    @property
    def world_to_camera(self) -> np.ndarray:
        w2c = np.eye(4)
        w2c[:3, :3] = qvec_to_rotmat(self.qvec)
        w2c[:3, 3] = self.tvec
        return w2c


@dataclass
class ColmapPoints:
    ids: np.ndarray      # (M,) int64
    xyz: np.ndarray      # (M,3) float64
    rgb: np.ndarray      # (M,3) uint8
    error: np.ndarray    # (M,) float64 mean reprojection error
    track_lengths: np.ndarray  # (M,) int64 number of images observing each point


@dataclass
class ColmapModel:
    cameras: dict[int, ColmapCamera]
    images: dict[int, ColmapImage]
    points: ColmapPoints | None  # None when the model folder has no points3D file
    path: str = ""
    format: str = ""  # "bin" or "txt"
    notes: list[str] = field(default_factory=list)


def qvec_to_rotmat(q) -> np.ndarray:
    """Rotation matrix of the (normalised) quaternion w,x,y,z; ValueError for a quaternion that
    is not finite or has (nearly) zero length."""
    q = np.asarray(q, dtype=np.float64)
    norm = np.linalg.norm(q)
    if not np.all(np.isfinite(q)) or norm < 1e-12:
        raise ValueError(f"quaternion {tuple(float(v) for v in q)} is not a rotation")
    w, x, y, z = q / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def find_model(folder) -> tuple[str, str] | None:
    """``(path, "bin"|"txt")`` of the model in ``folder`` (binary preferred), or None."""
    for ext in ("bin", "txt"):
        if all(os.path.isfile(os.path.join(folder, f"{name}.{ext}")) for name in _FILES[:2]):
            return os.fspath(folder), ext
    return None


def read_model(folder, ext: str | None = None) -> ColmapModel:
    """Read ``cameras``, ``images`` and (if present) ``points3D`` from ``folder``."""
    folder = os.fspath(folder)
    if ext is None:
        found = find_model(folder)
        if found is None:
            raise ColmapError(f"{folder}: no COLMAP model (cameras.bin/images.bin or "
                              "cameras.txt/images.txt)")
        ext = found[1]
    readers = {"bin": (_read_cameras_bin, _read_images_bin, _read_points_bin),
               "txt": (_read_cameras_txt, _read_images_txt, _read_points_txt)}[ext]
    parsed = []
    for name, reader in zip(_FILES, readers):
        path = os.path.join(folder, f"{name}.{ext}")
        if name == "points3D" and not os.path.isfile(path):
            parsed.append(None)
            continue
        try:
            with open(path, "rb") as f:
                data = f.read()
            parsed.append(reader(data))
        except ColmapError as exc:
            raise ColmapError(f"{path}: {exc}") from None
        except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise ColmapError(f"{path}: truncated or malformed COLMAP file ({exc})") from None
        except OSError as exc:
            raise ColmapError(f"cannot read {path}: {exc.strerror or exc}") from None
    cameras, images, points = parsed
    return ColmapModel(cameras, images, points, folder, ext)


# ---------------------------------------------------------------------------------------- binary

def _read_cameras_bin(b: bytes) -> dict[int, ColmapCamera]:
    (n,), off, cams = struct.unpack_from("<Q", b, 0), 8, {}
    for _ in range(n):
        cid, mid, w, h = struct.unpack_from("<iiQQ", b, off)
        off += 24
        if mid not in CAMERA_MODELS:
            raise ColmapError(f"camera {cid} has unknown camera model id {mid}")
        name, npar = CAMERA_MODELS[mid]
        params = np.array(struct.unpack_from(f"<{npar}d", b, off))
        off += 8 * npar
        cams[cid] = ColmapCamera(cid, name, w, h, params)
    return cams


_POINT2D = np.dtype([("x", "<f8"), ("y", "<f8"), ("id", "<i8")])


def _read_images_bin(b: bytes) -> dict[int, ColmapImage]:
    (n,), off, images = struct.unpack_from("<Q", b, 0), 8, {}
    for _ in range(n):
        iid, qw, qx, qy, qz, tx, ty, tz, cid = struct.unpack_from("<i7di", b, off)
        off += 64
        end = b.index(b"\0", off)
        name = b[off:end].decode("utf-8")
        (npts,) = struct.unpack_from("<Q", b, end + 1)
        off = end + 9
        pts = np.frombuffer(b, _POINT2D, count=npts, offset=off)
        off += npts * _POINT2D.itemsize
        images[iid] = ColmapImage(iid, np.array([qw, qx, qy, qz]), np.array([tx, ty, tz]), cid,
                                  name, np.stack([pts["x"], pts["y"]], 1), pts["id"].copy())
    return images


_POINT3D = np.dtype([("id", "<u8"), ("xyz", "<f8", 3), ("rgb", "u1", 3), ("error", "<f8"),
                     ("track_length", "<u8")])


def _read_points_bin(b: bytes) -> ColmapPoints:
    (n,) = struct.unpack_from("<Q", b, 0)
    starts = np.empty(n, np.int64)
    off, rec, unpack = 8, _POINT3D.itemsize, struct.Struct("<Q").unpack_from
    for k in range(n):  # records have variable length (the track): one small read per point
        starts[k] = off
        off += rec + 8 * unpack(b, off + rec - 8)[0]
    if off > len(b):
        raise ColmapError(f"truncated: {n} points need {off} bytes, file has {len(b)}")
    raw = np.frombuffer(b, np.uint8)[starts[:, None] + np.arange(rec)]
    table = raw.view(_POINT3D).reshape(n)
    return ColmapPoints(table["id"].astype(np.int64), table["xyz"].astype(np.float64),
                        table["rgb"].copy(), table["error"].copy(),
                        table["track_length"].astype(np.int64))


# ------------------------------------------------------------------------------------------ text

def _lines(b: bytes) -> list[str]:
    return b.decode("utf-8").splitlines()


def _data_lines(b: bytes):
    for line in _lines(b):
        line = line.strip()
        if line and not line.startswith("#"):
            yield line


def _read_cameras_txt(b: bytes) -> dict[int, ColmapCamera]:
    cams = {}
    for line in _data_lines(b):
        tok = line.split()
        cid, model = int(tok[0]), tok[1]
        if model not in _MODEL_IDS:
            raise ColmapError(f"camera {cid} has unknown camera model {model!r}")
        params = np.array([float(v) for v in tok[4:]])
        if len(params) != _MODEL_IDS[model][1]:
            raise ColmapError(f"camera {cid}: {model} needs {_MODEL_IDS[model][1]} parameters, "
                              f"found {len(params)}")
        cams[cid] = ColmapCamera(cid, model, int(tok[2]), int(tok[3]), params)
    return cams


def _read_images_txt(b: bytes) -> dict[int, ColmapImage]:
    lines, images, i = _lines(b), {}, 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        tok = line.split()
        # Like COLMAP: the line after an image line holds its keypoints, even when empty.
        pts_line = lines[i].split() if i < len(lines) else []
        i += 1
        pts = np.array(pts_line, dtype=np.float64).reshape(-1, 3)
        iid = int(tok[0])
        images[iid] = ColmapImage(iid, np.array(tok[1:5], dtype=np.float64),
                                  np.array(tok[5:8], dtype=np.float64), int(tok[8]),
                                  " ".join(tok[9:]), pts[:, :2].copy(), pts[:, 2].astype(np.int64))
    return images


def _read_points_txt(b: bytes) -> ColmapPoints:
    rows = [line.split() for line in _data_lines(b)]
    head = np.array([r[:8] for r in rows], dtype=np.float64).reshape(-1, 8)
    return ColmapPoints(head[:, 0].astype(np.int64), head[:, 1:4].copy(),
                        head[:, 4:7].astype(np.uint8), head[:, 7].copy(),
                        np.array([(len(r) - 8) // 2 for r in rows], dtype=np.int64))
