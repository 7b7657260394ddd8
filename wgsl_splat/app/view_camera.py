"""Interactive camera of the viewer: orbit, pan, zoom and fly, independent of any window system."""

from __future__ import annotations

import math
import os
import re

import numpy as np

from ..camera import CAMERAS_FILE, Camera


def _normalize(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _rotate(v: np.ndarray, axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues rotation of ``v`` about the unit ``axis``."""
    c, s = math.cos(angle), math.sin(angle)
    return v * c + np.cross(axis, v) * s + axis * np.dot(axis, v) * (1.0 - c)


def capture_up(cameras) -> np.ndarray:
    """The capture's up in world space: the mean of its cameras' image-up vectors (OpenCV -y),
    the first camera's when they cancel out."""
    ups = np.array([-c.rotation[1] for c in cameras])
    up = ups.mean(axis=0)
    return _normalize(up) if np.linalg.norm(up) > 1e-6 else ups[0]


def run_cameras_path(model_path) -> str | None:
    """The cameras file that came with a model: beside the PLY, or in the run folder of a
    trainer's ``OUT/point_cloud/iteration_N/point_cloud.ply`` (``OUT/cameras.json``); None when
    there is none."""
    folder = os.path.dirname(os.path.abspath(model_path))
    candidates = [folder]
    parent = os.path.dirname(folder)
    if re.fullmatch(r"iteration_\d+", os.path.basename(folder)) \
            and os.path.basename(parent) == "point_cloud":
        candidates.append(os.path.dirname(parent))
    for candidate in candidates:
        path = os.path.join(candidate, CAMERAS_FILE)
        if os.path.isfile(path):
            return path
    return None


class OrbitCamera:
    """Eye, target and world-up; vertical field of view. ``camera(w, h)`` gives the pinhole Camera.

    Orbit turns the eye around the target (about world-up, then about the view's right axis, never
    crossing the poles); pan moves eye and target in the view plane; zoom changes the distance;
    fly moves eye and target along the view axes (WASD + QE).
    """

    def __init__(self, eye, target, up=(0.0, -1.0, 0.0), fov_y_deg: float = 50.0,
                 roll: float = 0.0) -> None:
        self.eye = np.asarray(eye, dtype=np.float64)
        self.target = np.asarray(target, dtype=np.float64)
        self.up = _normalize(up)
        self.fov_y_deg = float(fov_y_deg)
        # radians the image turns about the view axis from level (world-up at the image's top):
        # a photo's own tilt, kept while orbiting about the capture's up
        self.roll = float(roll)
        self.set_home()

    # -- construction -----------------------------------------------------------------------------
    @staticmethod
    def for_points(points: np.ndarray, up=(0.0, -1.0, 0.0)) -> "OrbitCamera":
        """A view of a point cloud (the Gaussians' means) from outside its robust extent."""
        pts = np.asarray(points, dtype=np.float64)
        if len(pts) == 0:
            return OrbitCamera((0.0, 0.0, -4.0), (0.0, 0.0, 0.0), up)
        lo, hi = np.percentile(pts, 5, axis=0), np.percentile(pts, 95, axis=0)
        center = 0.5 * (lo + hi)
        radius = max(float(np.linalg.norm(hi - lo)) / 2, 1e-3)
        up = _normalize(up)
        side = np.cross(up, [1.0, 0.0, 0.0])
        if np.linalg.norm(side) < 1e-6:
            side = np.cross(up, [0.0, 0.0, 1.0])
        back = _normalize(side) + 0.3 * up      # slightly from above
        return OrbitCamera(center + _normalize(back) * 2.5 * radius, center, up)

    @staticmethod
    def from_camera(cam: Camera, target_distance: float, up=None) -> "OrbitCamera":
        """The pose and vertical field of view of a dataset camera, orbiting a point ahead of it
        about ``up`` (world space; default the camera's own up), the camera's tilt from it kept as
        the roll, so the first view is the camera's own."""
        rot = cam.rotation
        forward, down = rot[2], rot[1]
        fov_y = math.degrees(2 * math.atan(0.5 * cam.height / cam.fy))
        orbit = OrbitCamera(cam.center, cam.center + forward * target_distance,
                            -down if up is None else up, fov_y)
        _, right, image_up = orbit.axes()
        orbit.roll = math.atan2(float(np.dot(-down, -right)), float(np.dot(-down, image_up)))
        orbit.set_home()
        return orbit

    def set_home(self) -> None:
        self._home = (self.eye.copy(), self.target.copy(), self.up.copy(), self.fov_y_deg,
                      self.roll)

    def reset(self) -> None:
        eye, target, up, fov, roll = self._home
        self.eye, self.target, self.up, self.fov_y_deg = eye.copy(), target.copy(), up.copy(), fov
        self.roll = roll

    # -- state --------------------------------------------------------------------------------------
    @property
    def distance(self) -> float:
        return float(np.linalg.norm(self.eye - self.target))

    def axes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(forward, right, image-up) unit vectors in world space."""
        forward = _normalize(self.target - self.eye)
        right = np.cross(forward, self.up)
        if np.linalg.norm(right) < 1e-9:
            right = np.cross(forward, [1.0, 0.0, 0.0] if abs(forward[0]) < 0.9 else [0.0, 0.0, 1.0])
        right = _normalize(right)
        image_up = np.cross(right, forward)
        if self.roll:
            c, s = math.cos(self.roll), math.sin(self.roll)
            right, image_up = c * right + s * image_up, c * image_up - s * right
        return forward, right, image_up

    def camera(self, width: int, height: int, name: str = "viewer") -> Camera:
        forward, right, image_up = self.axes()
        fy = 0.5 * height / math.tan(math.radians(self.fov_y_deg) / 2)
        fov_x = math.degrees(2 * math.atan(0.5 * width / fy))
        return Camera.look_at(self.eye, self.target, image_up, fov_x_deg=fov_x, width=width,
                              height=height, name=name)

    # -- motions ------------------------------------------------------------------------------------
    def orbit(self, d_yaw: float, d_pitch: float) -> None:
        """Radians: yaw about world-up, then pitch (positive raises the eye) about the view's right
        axis, clamped to stay 5° away from the poles."""
        offset = _rotate(self.eye - self.target, self.up, d_yaw)
        elevation = math.asin(float(np.clip(np.dot(_normalize(offset), self.up), -1.0, 1.0)))
        d_pitch = float(np.clip(d_pitch, -1.48 - elevation, 1.48 - elevation))
        right = _normalize(np.cross(-offset, self.up))      # forward × up
        self.eye = self.target + _rotate(offset, right, -d_pitch)

    def pan(self, dx: float, dy: float) -> None:
        """Move eye and target by (dx, dy) × distance along the view's right and up axes."""
        _, right, image_up = self.axes()
        shift = (right * dx + image_up * dy) * self.distance
        self.eye = self.eye + shift
        self.target = self.target + shift

    def zoom(self, steps: float) -> None:
        """Positive steps move closer (by 10% of the distance per step)."""
        factor = 0.9 ** float(steps)
        self.eye = self.target + (self.eye - self.target) * factor

    def fly(self, forward: float, right: float, up: float) -> None:
        """Move eye and target along the view axes, in units of the orbit distance."""
        f, r, u = self.axes()
        shift = (f * forward + r * right + u * up) * self.distance
        self.eye = self.eye + shift
        self.target = self.target + shift


def start_view(cameras, train_indices, points) -> tuple[OrbitCamera, int]:
    """The viewers' first view: through the first training camera (the first camera when none is
    marked), orbiting about the capture's up at the distance of the model's median point; without
    cameras, from outside the points (index -1)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if not len(cameras):
        return OrbitCamera.for_points(pts), -1
    first = train_indices[0] if len(train_indices) else 0
    cam = cameras[first]
    center = np.median(pts, axis=0) if len(pts) else np.mean([c.center for c in cameras], axis=0)
    distance = float(np.linalg.norm(center - cam.center)) or 1.0
    return OrbitCamera.from_camera(cam, distance, capture_up(cameras)), first
