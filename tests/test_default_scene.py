"""The built-in procedural scene: determinism, framing, and agreement of the ray caster, the
cameras and the point cloud with the OpenCV projection u = fx·x/z + cx (pixel centres at +0.5)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from wgsl_splat.camera import Camera
from wgsl_splat.data import default_scene
from wgsl_splat.data.default_scene import (
    PIXEL_SAMPLES,
    WORLD_UP,
    SceneData,
    make_default_scene,
    raycast,
    scene_extent,
)


@pytest.fixture(scope="module")
def scene() -> SceneData:
    return make_default_scene()


def project(cam: Camera, pts: np.ndarray):
    """OpenCV pinhole projection written out independently of the module under test."""
    pc = pts @ cam.world_to_camera[:3, :3].T + cam.world_to_camera[:3, 3]
    z = pc[:, 2]
    return cam.fx * pc[:, 0] / z + cam.cx, cam.fy * pc[:, 1] / z + cam.cy, z


def test_shapes_dtypes_ranges(scene):
    assert len(scene.cameras) == len(scene.images) == 24
    names = [c.name for c in scene.cameras]
    assert names == sorted(names) and len(set(names)) == 24
    for cam, img in zip(scene.cameras, scene.images):
        assert (cam.width, cam.height) == (128, 128)
        assert img.shape == (128, 128, 3) and img.dtype == np.float32
        assert 0.0 <= img.min() and img.max() <= 1.0
    assert scene.points.shape == (3000, 3) and scene.points.dtype == np.float64
    assert scene.colors.shape == (3000, 3) and scene.colors.dtype == np.float32
    assert 0.0 <= scene.colors.min() and scene.colors.max() <= 1.0
    assert np.array_equal(scene.background, [0, 0, 0]) and scene.background.shape == (3,)
    assert scene.name


def test_non_square_and_background():
    s = make_default_scene(width=48, height=32, num_cameras=3, num_points=100, seed=5,
                           background=(1.0, 1.0, 1.0))
    assert [im.shape for im in s.images] == [(32, 48, 3)] * 3
    assert s.points.shape == (100, 3) and s.colors.shape == (100, 3)
    assert all((im == 1.0).all(axis=-1).any() for im in s.images)  # sky shows the background


def test_deterministic(scene):
    again = make_default_scene()
    for a, b in zip(scene.images, again.images):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(scene.points, again.points)
    np.testing.assert_array_equal(scene.colors, again.colors)
    other = make_default_scene(width=32, height=32, num_cameras=4, num_points=200, seed=1)
    same = make_default_scene(width=32, height=32, num_cameras=4, num_points=200, seed=1)
    np.testing.assert_array_equal(other.points, same.points)
    assert not np.array_equal(other.points, scene.points[:200])


def test_well_framed_with_structure(scene):
    for cam, img in zip(scene.cameras, scene.images):
        covered = (img != scene.background).any(axis=-1)
        assert 0.4 < covered.mean() < 0.98, cam.name  # mostly scene, some empty sky
        # Textures and shading give strong local contrast, not flat colour.
        assert np.abs(np.diff(img, axis=1)).mean() > 0.01, cam.name
        # The look-at target (middle of the objects) projects to the image centre.
        u, v, z = project(cam, np.array([[0.0, 0.0, 0.35]]))
        assert z[0] > 0 and abs(u[0] - 64) < 1e-6 and abs(v[0] - 64) < 1e-6
        # World up maps to image up (OpenCV -y): a point above the target is higher in the image.
        u2, v2, _ = project(cam, np.array([[0.0, 0.0, 0.35]]) + WORLD_UP)
        assert v2[0] < v[0] - 10


def check_points_against_render(cam: Camera, img: np.ndarray, depth: np.ndarray,
                                points: np.ndarray, colors: np.ndarray) -> int:
    """Visible points must land on pixels of the same depth and colour; returns how many."""
    u, v, z = project(cam, points)
    inside = (z > 0.1) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)
    iu, iv = np.floor(u[inside]).astype(int), np.floor(v[inside]).astype(int)
    d = depth[iv, iu]
    # Points lie on surfaces with 1 cm noise; occluded ones are much farther than the pixel depth.
    visible = np.abs(d - z[inside]) < 0.05
    assert visible.sum() > 0.2 * inside.sum(), cam.name
    err = np.abs(img[iv, iu][visible] - colors[inside][visible])
    assert np.median(err) < 0.05, (cam.name, np.median(err))
    assert np.mean(err.max(axis=1) < 0.1) > 0.8, cam.name  # only texture edges disagree
    return int(visible.sum())


def test_point_cloud_matches_render(scene):
    seen = np.zeros(len(scene.points), int)
    for cam, image in zip(scene.cameras, scene.images):
        np.testing.assert_array_equal(raycast(cam, samples=PIXEL_SAMPLES), image)
        img, depth = raycast(cam, return_depth=True)     # pixel centres: the points' colours
        u, v, z = project(cam, scene.points)
        check_points_against_render(cam, img, depth, scene.points, scene.colors)
        inside = (z > 0.1) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)
        iu = np.clip(np.floor(u).astype(int), 0, cam.width - 1)
        iv = np.clip(np.floor(v).astype(int), 0, cam.height - 1)
        seen += inside & (np.abs(depth[iv, iu] - z) < 0.05)
    assert np.mean(seen >= 2) > 0.9  # SfM-like: points are seen from several views


def _box_filtered(cam: Camera, n: int) -> np.ndarray:
    """The mean of a full n × n grid of rays in every pixel, cast through the module's rays."""
    prims = default_scene._build_scene()
    offsets = (np.arange(n) + 0.5) / n
    color, _, _ = default_scene._colors(prims, *default_scene._camera_rays(cam, offsets),
                                        np.zeros(3))
    return color.reshape(cam.height, cam.width, n * n, 3).mean(axis=2)


def test_antialiased_images():
    # The scene's images average PIXEL_SAMPLES² rays where a pixel's centre differs from a
    # neighbour's: what a full grid of rays in every pixel gives, and closer than one centre ray
    # to the pixel's true mean (many more rays), texture edges mixed.
    cam = Camera.look_at((2.2, -2.6, 1.9), (0.0, 0.0, 0.35), up=WORLD_UP, fov_x_deg=50.0,
                         width=64, height=48)
    centre, depth = raycast(cam, return_depth=True)
    aa, aa_depth = raycast(cam, samples=PIXEL_SAMPLES, return_depth=True)
    np.testing.assert_array_equal(depth, aa_depth)       # depth stays the pixel centre's
    full = _box_filtered(cam, PIXEL_SAMPLES)
    assert np.abs(aa - full).mean() < 2e-3 * np.abs(centre - full).mean() + 1e-4
    truth = _box_filtered(cam, 8)
    assert np.abs(aa - truth).mean() < 0.5 * np.abs(centre - truth).mean()
    # Centre rays give only the scene's shades; averaged edges add colours between them.
    assert len(np.unique(aa.reshape(-1, 3), axis=0)) > 1.2 * len(np.unique(centre.reshape(-1, 3),
                                                                             axis=0))
    assert aa.dtype == np.float32 and 0.0 <= aa.min() and aa.max() <= 1.0
    with pytest.raises(ValueError, match="at least 1"):
        raycast(cam, samples=0)


def test_general_intrinsics():
    # Off-centre principal point and fx != fy: the ray caster must follow the same projection.
    s = make_default_scene(width=32, height=32, num_cameras=2, num_points=2000, seed=3)
    base = Camera.look_at((3.0, -2.5, 2.2), (0.0, 0.0, 0.3), up=WORLD_UP, width=96, height=72)
    cam = Camera(base.world_to_camera, 80.0, 95.0, 41.3, 30.2, 96, 72, "odd")
    img, depth = raycast(cam, return_depth=True)
    assert check_points_against_render(cam, img, depth, s.points, s.colors) > 300


def test_depth_uses_pixel_centres(scene):
    # Unproject every hit pixel through its centre (u + 0.5): the many pixels that see the
    # ground must land exactly on z = 0. Pixel corners would miss it by ~depth gradient / 2.
    cam = scene.cameras[5]
    _, depth = raycast(cam, return_depth=True)
    v, u = np.mgrid[0:cam.height, 0:cam.width] + 0.5
    rays = np.stack([(u - cam.cx) / cam.fx, (v - cam.cy) / cam.fy, np.ones_like(u)], -1)
    hit = np.isfinite(depth)
    pc = rays[hit] * depth[hit][:, None]
    world = (pc - cam.world_to_camera[:3, 3]) @ cam.world_to_camera[:3, :3]
    on_ground = np.abs(world[:, 2]) < 1e-9
    assert on_ground.mean() > 0.3
    assert (world[:, 2] > -1e-9).all()  # nothing is seen below the ground


def test_scene_extent():
    cams = [Camera.look_at(e, (0, 0, 0), up=WORLD_UP)
            for e in [(2, 0, 1), (-2, 0, 1), (0, 2, 1), (0, -2, 1)]]
    assert scene_extent(cams) == pytest.approx(2.2)
    cams.append(Camera.look_at((0, 0, 6.0), (0, 0, 0), up=WORLD_UP))
    centers = np.array([(2, 0, 1), (-2, 0, 1), (0, 2, 1), (0, -2, 1), (0, 0, 6.0)])
    expected = 1.1 * np.linalg.norm(centers - centers.mean(0), axis=1).max()
    assert scene_extent(cams) == pytest.approx(expected)


def test_build_time():
    start = time.perf_counter()
    make_default_scene()
    elapsed = time.perf_counter() - start
    print(f"default scene build: {elapsed:.3f} s")
    # Generous bound on a shared 2-core machine; it guards against pathologically slow code.
    assert elapsed < 5.0
