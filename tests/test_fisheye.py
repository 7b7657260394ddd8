"""Fisheye cameras (docs/captures.md): undistorted on load to the widest pinhole view inside the
photo. A synthetic fisheye photo of a known scene, undistorted, matches the pinhole rendering of
that scene; degenerate lens parameters are refused in one line."""

import json

import numpy as np
import pytest
from test_datasets import gl_pose, make_colmap, save_png

from wgsl_splat.data.datasets import DatasetError, load_dataset
from wgsl_splat.data.images import Fisheye, fisheye_view, max_outside_pixels

W, H = 96, 72
FX, FY, CX, CY = 38.0, 37.0, 48.3, 35.6
K = (0.04, -0.012, 0.003, -0.0004)


def scene(x, y):
    """A known scene: colour as a smooth function of the ray (x, y, 1)."""
    return np.stack([0.5 + 0.4 * np.sin(2.5 * x + 0.3) * np.cos(1.7 * y),
                     0.5 + 0.4 * np.cos(1.9 * x - 2.1 * y),
                     0.5 + 0.3 * np.sin(1.3 * (x * x + y * y))], axis=-1)


def render(pixel_to_ray, width, height, ss=4):
    """The scene through a camera, supersampled ss×ss per pixel (a box-filtered high-res render)."""
    o = (np.arange(ss) + 0.5) / ss
    acc = 0.0
    for dy in o:
        for dx in o:
            u, v = np.meshgrid(np.arange(width) + dx, np.arange(height) + dy)
            acc = acc + scene(*pixel_to_ray(u, v))
    return acc / ss ** 2


def fisheye_ray(u, v, k=K):
    """Inverse of the fisheye model: pixel -> ray (x, y) with θ from θ_d by Newton."""
    xd, yd = (u - CX) / FX, (v - CY) / FY
    rd = np.hypot(xd, yd)
    lens = Fisheye(k)
    theta = rd.copy()
    for _ in range(30):
        h = 1e-7
        f = lens.theta_d(theta) - rd
        theta -= f / ((lens.theta_d(theta + h) - lens.theta_d(theta - h)) / (2 * h))
    r = np.tan(theta)
    s = np.where(rd > 0, r / np.maximum(rd, 1e-12), 1.0)
    return xd * s, yd * s


@pytest.fixture(scope="module")
def photo():
    return (np.clip(render(fisheye_ray, W, H), 0, 1) * 255 + 0.5).astype(np.uint8)


def test_fisheye_view_is_the_widest_inside_the_photo():
    lens = fisheye_view(K, W, H, FX, FY, CX, CY)
    assert max_outside_pixels(W, H, FX, FY, CX, CY, lens) <= 0
    wider = Fisheye(K, lens.scale * 0.99)
    assert max_outside_pixels(W, H, FX, FY, CX, CY, wider) > 0


def test_undistorted_fisheye_matches_the_pinhole_render(tmp_path, photo):
    rng = np.random.default_rng(0)
    make_colmap(tmp_path, rng, n_images=2, size=(W, H),
                models=[("OPENCV_FISHEYE", [FX, FY, CX, CY, *K])])
    save_png(tmp_path / "images" / "img_00.png", photo)
    d = load_dataset(tmp_path)
    cam = d.cameras[0]
    scale = fisheye_view(K, W, H, FX, FY, CX, CY).scale
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == pytest.approx((FX * scale, FY * scale, CX, CY))
    note = next(n for n in d.notes if n.startswith("undistorting 2 fisheye images"))
    assert "keeping" in note and "of the photo's area" in note
    expect = render(lambda u, v: ((u - cam.cx) / cam.fx, (v - cam.cy) / cam.fy), W, H)
    err = np.abs(d.load_image(0) - expect)
    assert err.mean() < 1 / 255 and err.max() < 0.04, (err.mean() * 255, err.max())
    # against a pinhole view that ignores the lens: far off
    naive = render(lambda u, v: ((u - CX) / FX, (v - CY) / FY), W, H)
    assert np.abs(d.load_image(0) - naive).mean() > 5 * err.mean()


@pytest.mark.parametrize("model,params", [
    ("SIMPLE_RADIAL_FISHEYE", [FX, CX, CY, 0.03]),
    ("RADIAL_FISHEYE", [FX, CX, CY, 0.03, -0.01]),
])
def test_colmap_one_and_two_term_fisheyes(tmp_path, model, params):
    make_colmap(tmp_path, np.random.default_rng(1), size=(W, H), models=[(model, params)])
    d = load_dataset(tmp_path)
    lens = d.sources[0].distortion
    assert isinstance(lens, Fisheye) and lens.k == tuple(params[3:])
    assert d.cameras[0].fx == pytest.approx(FX * lens.scale)


@pytest.mark.parametrize("key", [{"camera_model": "OPENCV_FISHEYE"}, {"is_fisheye": True}])
def test_transforms_fisheye(tmp_path, photo, key):
    save_png(tmp_path / "images" / "a.png", photo)
    save_png(tmp_path / "images" / "b.png", photo)
    meta = {"fl_x": FX, "fl_y": FY, "cx": CX, "cy": CY, "w": W, "h": H, **key,
            **{f"k{i + 1}": v for i, v in enumerate(K)},
            "frames": [{"file_path": f"images/{n}.png", "transform_matrix": gl_pose([3, 1, z])}
                       for n, z in (("a", 1), ("b", 2))]}
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    d = load_dataset(tmp_path, resolution=2)
    scale = fisheye_view(K, W, H, FX, FY, CX, CY).scale
    assert d.cameras[0].fx == pytest.approx(FX * scale / 2)
    assert any("fisheye images to pinhole views" in n for n in d.notes)


def test_degenerate_fisheye_is_refused_in_one_line(tmp_path):
    make_colmap(tmp_path, np.random.default_rng(2), size=(W, H),
                models=[("OPENCV_FISHEYE", [FX, FY, CX, CY, -2.0, 0, 0, 0])])
    with pytest.raises(DatasetError, match=r"^camera 1 \(OPENCV_FISHEYE\): fisheye k1=-2: the "
                                           r"lens model folds back at 2\d\.\d° off axis, inside "
                                           r"the photo .*degenerate$") as e:
        load_dataset(tmp_path)
    assert "\n" not in str(e.value)
