"""Random test scenes with the edge cases that break splat renderers.

One generator for the reference's finite-difference tests, the GPU-vs-CPU tests, the
``gradcheck`` command and the benchmarks, so they all exercise the same situations.
"""

from __future__ import annotations

import numpy as np

from ..camera import Camera
from ..model import GaussianModel, num_sh_coeffs


def random_camera(rng: np.random.Generator, width: int, height: int, distance: float = 4.0,
                  fov_x_deg: float = 50.0) -> Camera:
    """A camera on a sphere of radius ``distance`` looking at the origin (random direction)."""
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    eye = direction * distance
    up = (0.0, -1.0, 0.0) if abs(direction[1]) < 0.9 else (0.0, 0.0, 1.0)
    return Camera.look_at(eye, (0.0, 0.0, 0.0), up, fov_x_deg=fov_x_deg, width=width, height=height)


def random_scene(rng: np.random.Generator, n: int = 64, width: int = 70, height: int = 50, *,
                 sh_degree: int = 3, edge_cases: bool = True, dtype=np.float64
                 ) -> tuple[GaussianModel, Camera]:
    """``n`` Gaussians around the origin seen by a random camera; with ``edge_cases`` about a
    third of them are: behind the camera, straddling the image border, tiny (sub-pixel), huge
    (covering the whole image), a tight overlapping stack, outside the frustum clamp but reaching
    into the image, and nearly opaque ones."""
    cam = random_camera(rng, width, height)
    model = GaussianModel.random(n, rng, extent=1.0, sh_degree=sh_degree, dtype=np.float64)
    if edge_cases and n >= 16:
        rot = cam.rotation
        to_world = lambda p_cam: (p_cam - cam.translation) @ rot  # noqa: E731  (Rᵀ(p − t))
        k = max(1, n // 16)
        i = 0

        def take(count):
            nonlocal i
            sl = slice(i, min(i + count, n))
            i = sl.stop
            return sl

        s = take(k)  # behind the camera
        model.means[s] = to_world(np.column_stack([rng.uniform(-1, 1, (s.stop - s.start, 2)),
                                                   rng.uniform(-2.0, -0.2, s.stop - s.start)]))
        s = take(k)  # straddling the left/right/top/bottom border of the image
        m = s.stop - s.start
        z = rng.uniform(2.5, 4.5, m)
        u = np.where(rng.random(m) < 0.5, 0.0, width) + rng.normal(0, 3, m)
        v = rng.uniform(0, height, m)
        model.means[s] = to_world(np.column_stack([(u - cam.cx) / cam.fx * z, (v - cam.cy) / cam.fy * z, z]))
        s = take(k)  # tiny: far below a pixel, only the 0.3 px² dilation gives them a footprint
        model.log_scales[s] = np.log(rng.uniform(1e-4, 1e-3, (s.stop - s.start, 3)))
        s = take(max(1, k // 2))  # huge: covers the whole image
        model.log_scales[s] = np.log(rng.uniform(1.5, 3.0, (s.stop - s.start, 3)))
        model.opacity_logits[s] = rng.uniform(-3.0, -1.0, s.stop - s.start)
        s = take(k)  # overlapping stack along the view ray through the image centre
        m = s.stop - s.start
        z = np.linspace(3.0, 3.6, m) + rng.normal(0, 0.01, m)
        model.means[s] = to_world(np.column_stack([rng.normal(0, 0.02, (m, 2)), z]))
        model.opacity_logits[s] = rng.uniform(2.0, 6.0, m)  # saturate T and hit the 0.99 clamp
        s = take(k)  # beyond the ±1.3·tan(half-fov) Jacobian clamp yet wide enough to reach the image
        m = s.stop - s.start
        z = rng.uniform(2.5, 4.0, m)
        side = np.where(rng.random(m) < 0.5, -1.0, 1.0)
        u = cam.cx + side * rng.uniform(1.45, 1.7) * cam.tan_half_fov_x * cam.fx
        v = rng.uniform(0, height, m)
        model.means[s] = to_world(np.column_stack([(u - cam.cx) / cam.fx * z, (v - cam.cy) / cam.fy * z, z]))
        model.log_scales[s] = np.log(rng.uniform(0.8, 1.2, (m, 3)) * z[:, None])
        model.opacity_logits[s] = rng.uniform(-1.0, 1.0, m)
        s = take(k)  # nearly opaque elsewhere
        model.opacity_logits[s] = rng.uniform(4.0, 8.0, s.stop - s.start)
    if sh_degree < 3:
        model = model.with_sh_degree(sh_degree)
    assert model.sh.shape[1] == num_sh_coeffs(sh_degree)
    return model.astype(dtype), cam


def filter_cameras(camera: Camera, count: int = 4) -> list[Camera]:
    """``camera`` and ``count`` more of its size looking at the origin from nearer, farther and
    beside it (deterministic): training views for the antialiased mode's 3D filter in tests."""
    eye = camera.center
    dist = float(np.linalg.norm(eye))
    side = np.cross(eye, [0.0, 1.0, 0.0] if abs(eye[1]) < 0.9 * dist else [0.0, 0.0, 1.0])
    side *= 0.4 * dist / max(np.linalg.norm(side), 1e-12)
    cams = [camera]
    for k in range(count):
        position = eye * (0.6 + 0.3 * k) + side * (-1.0) ** k
        up = (0.0, -1.0, 0.0) if abs(position[1]) < 0.9 * np.linalg.norm(position) else (0.0, 0.0, 1.0)
        fov = np.degrees(2.0 * np.arctan(camera.tan_half_fov_x))
        cams.append(Camera.look_at(position, (0.0, 0.0, 0.0), up, fov_x_deg=fov,
                                   width=camera.width, height=camera.height, name=f"filter_{k}"))
    return cams
