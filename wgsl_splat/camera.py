"""Pinhole camera in the OpenCV convention (x right, y down, z forward), docs/design.md §2."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Camera:
    """A posed pinhole camera.

    ``world_to_camera`` maps homogeneous world points to camera space (OpenCV axes). Intrinsics are
    in pixels for an image of ``width`` x ``height``; pixel centres sit at integer + 0.5.
    """

    world_to_camera: np.ndarray
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    name: str = ""
    image_path: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        w2c = np.asarray(self.world_to_camera, dtype=np.float64)
        if w2c.shape != (4, 4):
            raise ValueError(f"world_to_camera must be 4x4, got {w2c.shape}")
        self.world_to_camera = w2c
        self.fx, self.fy, self.cx, self.cy = (float(v) for v in (self.fx, self.fy, self.cx, self.cy))
        self.width, self.height = int(self.width), int(self.height)
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"image size must be positive, got {self.width}x{self.height}")
        intrinsics = dict(fx=self.fx, fy=self.fy, cx=self.cx, cy=self.cy)
        if not all(np.isfinite(v) for v in intrinsics.values()):
            shown = ", ".join(f"{k}={v}" for k, v in intrinsics.items())
            raise ValueError(f"intrinsics must be finite, got {shown}")
        if self.fx <= 0 or self.fy <= 0:
            raise ValueError(f"focal lengths must be positive, got fx={self.fx}, fy={self.fy}")
        if not np.all(np.isfinite(w2c)):
            raise ValueError("the pose (world_to_camera) has non-finite entries")
        rot = w2c[:3, :3]
        # A pose must be a proper rotation: an all-zero, scaled or mirrored matrix renders nonsense
        # silently. The tolerance admits float32 round trips of real poses.
        if not np.allclose(rot @ rot.T, np.eye(3), atol=1e-4) or np.linalg.det(rot) <= 0:
            raise ValueError(f"the pose's rotation is not a rotation matrix "
                             f"(determinant {np.linalg.det(rot):.3g})")

    @property
    def rotation(self) -> np.ndarray:
        """World-to-camera rotation R (3x3)."""
        return self.world_to_camera[:3, :3]

    @property
    def translation(self) -> np.ndarray:
        """World-to-camera translation t (3,)."""
        return self.world_to_camera[:3, 3]

    @property
    def center(self) -> np.ndarray:
        """Camera centre in world coordinates, -Rᵀt."""
        return -self.rotation.T @ self.translation

    def sees(self, points: np.ndarray, near: float = 0.0) -> np.ndarray:
        """Whether each world point (N, 3) lies in front of the camera (depth > ``near``) and
        projects inside its image, as a pinhole projects it; (N,) bool."""
        t = np.asarray(points, np.float64) @ self.rotation.T + self.translation
        z = np.where(t[:, 2] > near, t[:, 2], 1.0)      # behind: any finite depth, masked below
        u = self.fx * t[:, 0] / z + self.cx
        v = self.fy * t[:, 1] / z + self.cy
        return (t[:, 2] > near) & (u >= 0) & (u < self.width) & (v >= 0) & (v < self.height)

    @property
    def tan_half_fov_x(self) -> float:
        return 0.5 * self.width / self.fx

    @property
    def tan_half_fov_y(self) -> float:
        return 0.5 * self.height / self.fy

    def scaled(self, factor: float) -> "Camera":
        """The same camera for an image downscaled by ``factor`` (e.g. ``-r 4``)."""
        w = max(1, int(round(self.width / factor)))
        h = max(1, int(round(self.height / factor)))
        sx, sy = w / self.width, h / self.height
        return Camera(self.world_to_camera.copy(), self.fx * sx, self.fy * sy, self.cx * sx,
                      self.cy * sy, w, h, self.name, self.image_path)

    @staticmethod
    def look_at(eye, target, up=(0.0, -1.0, 0.0), *, fov_x_deg: float = 60.0, width: int = 128,
                height: int = 128, name: str = "") -> "Camera":
        """A camera at ``eye`` looking at ``target``; ``up`` is world-up expressed so that it maps to
        image-up (OpenCV's -y). Principal point at the image centre, square pixels."""
        eye = np.asarray(eye, dtype=np.float64)
        forward = np.asarray(target, dtype=np.float64) - eye
        forward /= np.linalg.norm(forward)
        down = -np.asarray(up, dtype=np.float64)
        right = np.cross(down, forward)
        if np.linalg.norm(right) < 1e-9:  # up parallel to the view direction: pick any other
            right = np.cross(np.array([1.0, 0.0, 0.0]) if abs(forward[0]) < 0.9 else
                             np.array([0.0, 0.0, 1.0]), forward)
        right /= np.linalg.norm(right)
        down = np.cross(forward, right)
        rot = np.stack([right, down, forward])  # rows: camera axes in world coordinates
        w2c = np.eye(4)
        w2c[:3, :3] = rot
        w2c[:3, 3] = -rot @ eye
        fx = 0.5 * width / np.tan(np.radians(fov_x_deg) / 2)
        return Camera(w2c, fx, fx, width / 2, height / 2, width, height, name)


# -- cameras.json: a run's cameras beside its model ---------------------------------------------------
# The layout of 3DGS's ``cameras.json`` (``utils/camera_utils.py: camera_to_JSON``: per camera id,
# img_name, width, height, position — the centre —, rotation — camera-to-world, rows —, fx, fy),
# which its viewers read; ours adds cx, cy (3DGS assumes the image centre) and split ("train" or
# "test"), which 3DGS's readers ignore. A camera may instead give ``world_to_camera`` (4x4).
CAMERAS_FILE = "cameras.json"


def camera_to_json(cam: Camera, index: int, split: str | None = None) -> dict:
    entry = dict(id=index, img_name=cam.name, width=cam.width, height=cam.height,
                 position=cam.center.tolist(), rotation=cam.rotation.T.tolist(),
                 fx=cam.fx, fy=cam.fy, cx=cam.cx, cy=cam.cy)
    if split is not None:
        entry["split"] = split
    return entry


def camera_from_json(entry: dict, index: int) -> Camera:
    """One entry of a cameras file (either pose form); KeyError, ValueError or TypeError when it
    is not one."""
    width, height = int(entry["width"]), int(entry["height"])
    if "world_to_camera" in entry:
        w2c = np.asarray(entry["world_to_camera"], dtype=np.float64)
    else:
        c2w = np.asarray(entry["rotation"], dtype=np.float64)
        position = np.asarray(entry["position"], dtype=np.float64)
        if c2w.shape != (3, 3) or position.shape != (3,):
            raise ValueError("rotation must be 3x3 and position 3 numbers")
        w2c = np.eye(4)
        w2c[:3, :3] = c2w.T
        w2c[:3, 3] = -c2w.T @ position
    name = entry.get("name", entry.get("img_name", f"camera_{index:03d}"))
    return Camera(w2c, entry["fx"], entry["fy"], entry.get("cx", 0.5 * width),
                  entry.get("cy", 0.5 * height), width, height, str(name))


def cameras_to_json(cameras, train_indices) -> list[dict]:
    """Every camera of a scene, in its order, each marked as training or held out."""
    train = set(train_indices)
    return [camera_to_json(cam, i, "train" if i in train else "test")
            for i, cam in enumerate(cameras)]


def cameras_from_json(raw) -> tuple[list[Camera], list[int]]:
    """The cameras of a parsed cameras file (one entry or a list) and the indices of the training
    ones (every camera when none is marked)."""
    items = raw if isinstance(raw, list) else [raw]
    cameras = [camera_from_json(entry, i) for i, entry in enumerate(items)]
    train = [i for i, entry in enumerate(items) if entry.get("split", "train") == "train"]
    return cameras, train
