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
