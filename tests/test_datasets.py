"""Dataset loading: the two real scenes, COLMAP bin/txt, transforms.json, single images, errors,
the processed-image cache and the image primitives (area resize, undistortion)."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wgsl_splat.camera import Camera
from wgsl_splat.data.colmap_model import CAMERA_MODELS, qvec_to_rotmat, read_model
from wgsl_splat.data.datasets import DatasetError, load_dataset
from wgsl_splat.data.images import Distortion, read_image, resize_area, undistort_image


@pytest.fixture
def rng(request):
    seed = int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.name}: seed={seed}")
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def private_user_cache(tmp_path, monkeypatch):
    """Route the fallback cache into tmp_path so tests never write to the real user cache."""
    monkeypatch.delenv("WGSL_SPLAT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user_cache"))
    return tmp_path / "user_cache"


def project(cam: Camera, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel positions (pixel centres at +0.5) and depths of world points."""
    pc = pts @ cam.rotation.T + cam.translation
    z = pc[:, 2]
    return np.stack([cam.fx * pc[:, 0] / z + cam.cx, cam.fy * pc[:, 1] / z + cam.cy], 1), z


def axes_focus(cams):
    """Least-squares point nearest to all optical axes, and each axis' distance to it."""
    c = np.stack([k.center for k in cams])
    d = np.stack([k.rotation[2] for k in cams])
    proj = np.eye(3) - d[:, :, None] * d[:, None, :]
    focus = np.linalg.solve(proj.sum(0), np.einsum("nij,nj->i", proj, c))
    return focus, np.linalg.norm(np.einsum("nij,nj->ni", proj, focus - c), axis=1)


# ------------------------------------------------------------------------ synthetic COLMAP scenes

def save_png(path: Path, img: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path)


def make_colmap(root: Path, rng, *, n_images=3, size=(40, 30), models=None, n_points=20,
                fmt="bin", extra_images=(), images=True):
    """A small COLMAP scene: one camera per image (models cycle through ``models``)."""
    models = models or [("PINHOLE", [50.0, 52.0, 20.5, 14.5]),
                        ("SIMPLE_PINHOLE", [48.0, 19.0, 16.0])]
    cams = {i + 1: (models[i % len(models)][0], size, models[i % len(models)][1])
            for i in range(n_images)}
    imgs = {}
    for i in range(n_images):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        xys = rng.uniform(0, 30, size=(4, 2))
        ids = np.array([-1, 3, 7, 0], dtype=np.int64)
        imgs[i + 1] = (q, rng.normal(size=3), i + 1, f"img_{i:02d}.png", xys, ids)
    pts = (rng.normal(size=(n_points, 3)), rng.integers(0, 256, size=(n_points, 3)),
           rng.uniform(0, 1, n_points))
    model_dir = root / "sparse" / "0"
    model_dir.mkdir(parents=True)
    (write_colmap_bin if fmt == "bin" else write_colmap_txt)(model_dir, cams, imgs, pts)
    if images:
        for q, t, cid, name, _, _ in imgs.values():
            w, h = cams[cid][1]
            save_png(root / "images" / name, rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for name in extra_images:
            save_png(root / "images" / name, np.zeros((4, 4, 3), np.uint8))
    return cams, imgs, pts


def write_colmap_bin(folder: Path, cams, imgs, pts) -> None:
    ids = {name: mid for mid, (name, _) in CAMERA_MODELS.items()}
    b = struct.pack("<Q", len(cams))
    for cid, (model, (w, h), params) in cams.items():
        b += struct.pack(f"<iiQQ{len(params)}d", cid, ids[model], w, h, *params)
    (folder / "cameras.bin").write_bytes(b)
    b = struct.pack("<Q", len(imgs))
    for iid, (q, t, cid, name, xys, p3d) in imgs.items():
        b += struct.pack("<i7di", iid, *q, *t, cid) + name.encode() + b"\0"
        b += struct.pack("<Q", len(xys))
        b += b"".join(struct.pack("<ddq", x, y, p) for (x, y), p in zip(xys, p3d))
    (folder / "images.bin").write_bytes(b)
    xyz, rgb, err = pts
    b = struct.pack("<Q", len(xyz))
    for k in range(len(xyz)):
        b += struct.pack("<Q3d3BdQ", k, *xyz[k], *rgb[k], err[k], 2)
        b += struct.pack("<iiii", 1, 0, 2, 1)  # track: (image 1, keypoint 0), (image 2, keypoint 1)
    (folder / "points3D.bin").write_bytes(b)


def write_colmap_txt(folder: Path, cams, imgs, pts) -> None:
    lines = ["# Camera list with one line of data per camera:"]
    lines += [f"{cid} {m} {w} {h} " + " ".join(repr(float(p)) for p in params)
              for cid, (m, (w, h), params) in cams.items()]
    (folder / "cameras.txt").write_text("\n".join(lines) + "\n")
    lines = ["# Image list with two lines of data per image:", "#   IMAGE_ID, QW, ..."]
    for iid, (q, t, cid, name, xys, p3d) in imgs.items():
        lines.append(" ".join(map(repr, [iid, *map(float, q), *map(float, t), cid])) + " " + name)
        lines.append(" ".join(f"{x!r} {y!r} {p}" for (x, y), p in zip(xys.tolist(), p3d)))
    (folder / "images.txt").write_text("\n".join(lines) + "\n")
    xyz, rgb, err = pts
    lines = ["# 3D point list"]
    lines += [" ".join(map(repr, [k, *map(float, xyz[k]), *map(int, rgb[k]), float(err[k])]))
              + " 1 0 2 1" for k in range(len(xyz))]
    (folder / "points3D.txt").write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------ real data

@pytest.fixture(scope="module")
def mouse(tmp_path_factory, mouse_dir):
    return load_dataset(mouse_dir, resolution=4, cache_dir=tmp_path_factory.mktemp("mouse_cache"))


def test_mouse_r4_cameras_points_and_skip_note(mouse):
    assert mouse.kind == "colmap" and len(mouse.cameras) == 56
    assert [c.name for c in mouse.cameras] == sorted(c.name for c in mouse.cameras)
    assert all(c.image_path and Path(c.image_path).name == c.name for c in mouse.cameras)
    assert {(c.width, c.height) for c in mouse.cameras} == {(360, 480), (480, 360)}
    assert sum(c.width == 360 for c in mouse.cameras) == 17
    skip = [n for n in mouse.notes if n.startswith("skipped 3 unregistered images")]
    assert len(skip) == 1 and "1282F4139734D4E121C725FCE6B754BA.jpg" in skip[0]
    assert mouse.points.shape == (4443, 3) and mouse.points.dtype == np.float64
    assert mouse.point_colors.shape == (4443, 3) and mouse.point_colors.dtype == np.float32
    assert 0 <= mouse.point_colors.min() and mouse.point_colors.max() <= 1
    assert mouse.train_indices == list(range(56)) and mouse.test_indices == []
    assert mouse.scene_extent() > 0
    lo, hi = mouse.bounds()
    assert np.all(lo < hi)


def test_mouse_sfm_points_reproject_onto_their_keypoints(mouse, mouse_dir):
    """Pose convention check: every point projects in front of the cameras that observe it, inside
    the frame, onto the keypoint COLMAP matched (scaled to -r 4)."""
    model = read_model(mouse_dir / "sparse" / "0")
    by_name = {im.name: im for im in model.images.values()}
    index = {pid: k for k, pid in enumerate(model.points.ids)}
    inside, errors, total = 0, [], 0
    for cam in mouse.cameras:
        im = by_name[cam.name]
        seen = im.point3d_ids >= 0
        uv, z = project(cam, mouse.points[[index[p] for p in im.point3d_ids[seen]]])
        ok = (z > 0) & (uv[:, 0] >= 0) & (uv[:, 0] <= cam.width) & (uv[:, 1] >= 0) & \
             (uv[:, 1] <= cam.height)
        inside, total = inside + ok.sum(), total + len(z)
        errors.append(np.linalg.norm(uv - im.xys[seen] / 4, axis=1))
    errors = np.concatenate(errors)
    assert total > 10000
    assert inside / total > 0.99
    assert np.median(errors) < 0.5  # pixels at -r 4 (COLMAP's mean error is ~0.5 px full size)


def test_mouse_eval_split_and_mixed_size_images(mouse_dir):
    d = load_dataset(mouse_dir, resolution=4, eval_split=True)
    assert d.test_indices == list(range(0, 56, 8))
    assert sorted(d.train_indices + d.test_indices) == list(range(56))
    assert [c.name for c in d.test_cameras] == sorted(c.name for c in d.cameras)[::8]
    portrait = next(i for i, c in enumerate(d.cameras) if c.width < c.height)
    landscape = next(i for i, c in enumerate(d.cameras) if c.width > c.height)
    for i in (portrait, landscape):
        img = d.load_image(i)
        assert img.shape == (d.cameras[i].height, d.cameras[i].width, 3)
        assert img.dtype == np.float32 and 0 <= img.min() and img.max() <= 1 and img.std() > 0.01


def test_read_only_data_folder_falls_back_to_user_cache(tmp_path, private_user_cache, mouse_dir,
                                                         rng):
    """A read-only scene folder (as the shared data is meant to be) caches into the user cache.
    The test makes its own read-only copy: a downloaded data folder is writable, and earlier
    tests cache into it. Mode bits, not a failed write, mark it read-only, so this holds as root
    too (root may write anywhere; the loader still leaves an r-x folder alone)."""
    import shutil

    scene = tmp_path / "mouse"
    for part in ("images", "sparse"):
        shutil.copytree(mouse_dir / part, scene / part)
    folders = [scene, *(p for p in scene.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    try:
        d = load_dataset(scene, resolution=4)
        i = int(rng.integers(len(d.cameras)))
        d.load_image(i)
        assert d.stats["cache_writes"] == 1
        assert private_user_cache in d.cache_dir.parents
        assert len(list(d.cache_dir.glob("*.png"))) == 1
        assert not (scene / ".wgsl_splat_cache").exists()
        again = load_dataset(scene, resolution=4)
        again.load_image(i)
        assert again.stats == {"decoded": 0, "cache_hits": 1, "cache_writes": 0}
    finally:
        for folder in folders:
            folder.chmod(stat.S_IRWXU)


def test_fox_r4_undistorted_cameras_look_at_common_point(tmp_path, fox_dir):
    d = load_dataset(fox_dir, resolution=4, cache_dir=tmp_path)
    assert d.kind == "nerf" and len(d.cameras) == 67 and d.points is None
    assert {(c.width, c.height) for c in d.cameras} == {(270, 480)}
    assert d.cameras[0].name == "0001.jpg"
    assert any(n.startswith("undistorting 67 images") for n in d.notes)
    assert all(s.distortion is not None and s.distortion.radial[0] == pytest.approx(0.0578421)
               for s in d.sources)
    focus, dist = axes_focus(d.cameras)
    radius = np.median([np.linalg.norm(c.center - focus) for c in d.cameras])
    assert np.median(dist) < 0.2 * radius
    for cam in d.cameras:  # in front of every camera, inside every frame
        uv, z = project(cam, focus[None])
        assert z[0] > 0 and 0 < uv[0, 0] < cam.width and 0 < uv[0, 1] < cam.height
    lo, hi = d.bounds()
    assert np.all(lo < focus) and np.all(focus < hi)
    assert np.all(hi - lo < radius)  # the cameras are outside the init box
    img = d.load_image(0)
    plain = resize_area(read_image(d.sources[0].path), 480, 270)
    diff = np.abs(img - plain)
    assert img.shape == (480, 270, 3) and 0.001 < diff.mean() < 0.05


# --------------------------------------------------------------------------- COLMAP bin and text

def test_colmap_text_equals_binary(tmp_path, rng):
    state = rng.bit_generator.state
    make_colmap(tmp_path / "bin", rng, fmt="bin")
    rng.bit_generator.state = state
    make_colmap(tmp_path / "txt", rng, fmt="txt")
    a, b = load_dataset(tmp_path / "bin"), load_dataset(tmp_path / "txt")
    assert len(a.cameras) == len(b.cameras) == 3
    for ca, cb in zip(a.cameras, b.cameras):
        assert ca.name == cb.name
        assert np.allclose(ca.world_to_camera, cb.world_to_camera, atol=1e-12)
        assert (ca.fx, ca.fy, ca.cx, ca.cy, ca.width, ca.height) == \
            (cb.fx, cb.fy, cb.cx, cb.cy, cb.width, cb.height)
    assert np.array_equal(a.points, b.points) and np.array_equal(a.point_colors, b.point_colors)
    assert a.cameras[1].fx == a.cameras[1].fy == 48.0  # SIMPLE_PINHOLE
    ma, mb = (read_model(tmp_path / f / "sparse" / "0") for f in ("bin", "txt"))
    for k in ma.images:
        assert np.array_equal(ma.images[k].xys, mb.images[k].xys)
        assert np.array_equal(ma.images[k].point3d_ids, mb.images[k].point3d_ids)
    assert np.array_equal(ma.points.track_lengths, mb.points.track_lengths)
    q = ma.images[1].qvec
    assert np.allclose(a.cameras[0].rotation, qvec_to_rotmat(q))


def test_colmap_distorted_model_is_undistorted_on_load(tmp_path, rng):
    make_colmap(tmp_path, rng, models=[("OPENCV", [50, 50, 20, 15, 0.1, -0.05, 0.01, 0.0])])
    d = load_dataset(tmp_path)
    assert any(n.startswith("undistorting 3 images") for n in d.notes)
    raw = read_image(d.sources[0].path)
    img = d.load_image(0)
    assert img.shape == raw.shape and not np.allclose(img, raw)


def test_colmap_unsupported_model_gives_undistort_hint(tmp_path, rng):
    # (fisheyes are undistorted since issue 24: tests/test_fisheye.py)
    make_colmap(tmp_path, rng, models=[("FOV", [50, 50, 20, 15, 0.1])])
    with pytest.raises(DatasetError, match="FOV.*colmap image_undistorter"):
        load_dataset(tmp_path)


# ------------------------------------------------------------------------------ transforms.json

def gl_pose(eye) -> list:
    """OpenGL camera-to-world at ``eye`` looking at the origin with +z world up."""
    eye = np.asarray(eye, float)
    back = eye / np.linalg.norm(eye)
    right = np.cross([0, 0, 1.0], back)
    right /= np.linalg.norm(right)
    m = np.eye(4)
    m[:3, :3] = np.stack([right, np.cross(back, right), back], 1)
    m[:3, 3] = eye
    return m.tolist()


def test_blender_layout_angle_x_extensionless_rgba(tmp_path):
    angle = 0.69
    for split, eyes in (("train", [(4, 0, 1), (0, 4, 1)]), ("test", [(-4, 0, 1), (0, -4, 1)])):
        frames = []
        for k, eye in enumerate(eyes):
            img = np.zeros((16, 16, 4), np.uint8)
            img[:, :8] = (255, 0, 0, 255)   # left half opaque red
            img[:, 8:] = (0, 255, 0, 0)     # right half transparent (hidden green)
            save_png(tmp_path / split / f"r_{k}.png", img)
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": gl_pose(eye)})
        (tmp_path / f"transforms_{split}.json").write_text(
            json.dumps({"camera_angle_x": angle, "frames": frames}))
    d = load_dataset(tmp_path, background=(1, 1, 1), eval_split=True, resolution=2)
    assert d.kind == "nerf" and len(d.cameras) == 4
    assert [c.name for c in d.test_cameras] == ["test/r_0.png", "test/r_1.png"]
    cam = d.cameras[0]
    assert (cam.width, cam.height) == (8, 8)
    assert cam.fx == pytest.approx(0.5 * 16 / math.tan(angle / 2) / 2)
    for c in d.cameras:  # the origin is in front, at the image centre
        uv, z = project(c, np.zeros((1, 3)))
        assert z[0] == pytest.approx(math.sqrt(17)) and np.allclose(uv[0], [4, 4])
    img = d.load_image(0)
    assert np.allclose(img[:, :4], [1, 0, 0], atol=1 / 255)
    assert np.allclose(img[:, 4:], [1, 1, 1], atol=1 / 255)  # no green bleeds through
    merged = load_dataset(tmp_path)
    assert merged.test_indices == [] and len(merged.train_indices) == 4


def make_blender(root: Path, channels: int = 4, splits=("train", "test")) -> None:
    for split in splits:
        frames = []
        for k, eye in enumerate([(4, 0, 1), (0, 4, 1)]):
            save_png(root / split / f"r_{k}.png", np.full((8, 8, channels), 200, np.uint8))
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": gl_pose(eye)})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": 0.7,
                                                                   "frames": frames}))


def test_blender_layout_initialises_in_3dgs_cube(tmp_path):
    """NeRF-synthetic scenes start from random points in [-1.3, 1.3]³ as in 3DGS, whatever the
    camera radius (here 4.1, which the generic camera rule would turn into a ±2 cube)."""
    make_blender(tmp_path)
    d = load_dataset(tmp_path, background=(1, 1, 1), eval_split=True)
    assert d.synthetic
    lo, hi = d.bounds()
    assert np.allclose(lo, -1.3) and np.allclose(hi, 1.3)
    assert any("±1.3" in n for n in d.notes)
    single = load_dataset(tmp_path / "transforms_train.json")   # not the Blender layout
    assert not single.synthetic


def test_blender_layout_errors(tmp_path):
    make_blender(tmp_path / "test_only", splits=("test",))
    with pytest.raises(DatasetError, match="transforms_test.json has no transforms_train.json"):
        load_dataset(tmp_path / "test_only", eval_split=True)
    make_blender(tmp_path / "rgb", channels=3)
    with pytest.raises(DatasetError, match=r"r_0.png has no alpha channel") as err:
        load_dataset(tmp_path / "rgb", background=(1, 1, 1), eval_split=True)
    assert "\n" not in str(err.value)
    load_dataset(tmp_path / "rgb", eval_split=True)    # on black, RGB pixels are taken as they are
    make_blender(tmp_path / "missing")
    (tmp_path / "missing" / "test" / "r_1.png").unlink()
    with pytest.raises(DatasetError, match=r"missing: \./test/r_1"):
        load_dataset(tmp_path / "missing", background=(1, 1, 1), eval_split=True)


def test_transforms_per_frame_intrinsics_and_pose_flip(tmp_path):
    save_png(tmp_path / "a.png", np.full((20, 30, 3), 128, np.uint8))
    meta = {"fl_x": 40.0, "w": 30, "h": 20, "frames": [
        {"file_path": "a.png", "transform_matrix": gl_pose((0, -5, 0)), "fl_y": 42.0, "cx": 14.0}]}
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    d = load_dataset(tmp_path / "transforms.json")
    c = d.cameras[0]
    assert (c.fx, c.fy, c.cx, c.cy) == (40.0, 42.0, 14.0, 10.0)
    uv, z = project(c, np.array([[0.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]]))
    assert np.allclose(z, [5, 5, 5, 4]) and np.allclose(uv[0], [14, 10])
    assert uv[1, 0] > uv[0, 0]          # world +x (camera right) is image right
    assert uv[2, 1] < uv[0, 1]          # world +z (camera up) is image up
    assert not d.cache_dir and np.allclose(d.load_image(0), 128 / 255)


def test_transforms_point_cloud_and_refused_models(tmp_path):
    save_png(tmp_path / "a.png", np.zeros((20, 30, 3), np.uint8))
    (tmp_path / "sparse_pc.ply").write_text(
        "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
        "property float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\n"
        "end_header\n0 1 2 255 0 0\n3 4 5 0 0 255\n")
    meta = {"fl_x": 40.0, "ply_file_path": "sparse_pc.ply",
            "frames": [{"file_path": "a.png", "transform_matrix": gl_pose((0, -5, 0))}]}
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    d = load_dataset(tmp_path)
    assert np.array_equal(d.points, [[0, 1, 2], [3, 4, 5]])
    assert np.array_equal(d.point_colors, [[1, 0, 0], [0, 0, 1]])
    # (fisheyes are undistorted since issue 24: tests/test_fisheye.py)
    for bad in ({"camera_model": "EQUIRECTANGULAR"}, {"camera_model": "FOV"}):
        (tmp_path / "transforms.json").write_text(json.dumps({**meta, **bad}))
        with pytest.raises(DatasetError, match="not supported.*pinhole"):
            load_dataset(tmp_path)


# ----------------------------------------------------------------------------------- single image

def test_single_image_mode(tmp_path, rng):
    pixels = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    save_png(tmp_path / "photo.png", pixels)
    d = load_dataset(tmp_path / "photo.png")
    c = d.cameras[0]
    assert d.kind == "image" and d.points is None and c.name == "photo.png"
    assert np.array_equal(c.world_to_camera, np.eye(4)) and c.fx == c.fy == 400
    assert np.array_equal(d.load_image(0), pixels.astype(np.float32) / 255)
    lo, hi = d.bounds()
    assert lo[2] == hi[2] == 1
    uv, z = project(c, np.array([lo, hi]))
    assert np.allclose(uv, [[0, 0], [40, 30]])
    assert d.scene_extent() > 0
    small = load_dataset(tmp_path / "photo.png", resolution=2, eval_split=True,
                         cache_dir=tmp_path / "c")
    assert (small.cameras[0].width, small.cameras[0].height) == (20, 15)
    assert small.train_indices == small.test_indices == [0]
    block = pixels.astype(np.float32).reshape(15, 2, 20, 2, 3).mean((1, 3))
    diff = np.abs(small.load_image(0) * 255 - block)  # area average, then 8-bit rounding
    assert diff.max() <= 0.5 + 1e-3


# ----------------------------------------------------------------------------------------- errors

def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg and isinstance(exc_info.value, ValueError)
    return msg


def test_error_missing_and_unrecognised_paths(tmp_path):
    with pytest.raises(DatasetError, match="does not exist") as e:
        load_dataset(tmp_path / "nope")
    _one_line(e)
    with pytest.raises(DatasetError, match="not a dataset"):
        load_dataset(tmp_path)
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(DatasetError, match="neither an image"):
        load_dataset(tmp_path / "notes.txt")
    with pytest.raises(DatasetError, match="resolution"):
        load_dataset(tmp_path, resolution=0.5)


def test_error_registered_images_missing(tmp_path, rng):
    make_colmap(tmp_path, rng, n_images=8)
    for k in range(7):
        (tmp_path / "images" / f"img_{k:02d}.png").unlink()
    with pytest.raises(DatasetError, match=r"7 of 8 images .* img_00.png.*\(2 more\)") as e:
        load_dataset(tmp_path)
    _one_line(e)


def test_error_corrupt_truncated_and_wrong_size_images(tmp_path, rng):
    make_colmap(tmp_path, rng)
    bad = tmp_path / "images" / "img_01.png"
    good = bad.read_bytes()
    bad.write_bytes(b"not an image at all")
    with pytest.raises(DatasetError, match="cannot read image .*img_01.png"):
        load_dataset(tmp_path)
    bad.write_bytes(good[: len(good) // 2])  # header fine, pixels cut off
    d = load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="cannot decode image .*img_01.png") as e:
        d.load_image(1)
    _one_line(e)
    save_png(bad, np.zeros((30, 30, 3), np.uint8))
    with pytest.raises(DatasetError, match=r"img_01.png is 30x30 but its camera 2 .* 40x30"):
        load_dataset(tmp_path)


def test_predownscaled_images_are_accepted(tmp_path, rng):
    make_colmap(tmp_path, rng, size=(80, 60), models=[("PINHOLE", [90, 90, 40, 30])])
    for k in range(3):
        save_png(tmp_path / "images" / f"img_{k:02d}.png", np.zeros((30, 40, 3), np.uint8))
    d = load_dataset(tmp_path, resolution=2)
    assert d.cameras[0].fx == 45 and d.load_image(0).shape == (30, 40, 3) and d.cache_dir is None


def test_empty_or_absent_point_cloud_is_a_note(tmp_path, rng):
    make_colmap(tmp_path, rng, n_points=0, extra_images=["unposed.png"])
    d = load_dataset(tmp_path)
    assert d.points is None and d.point_colors is None
    assert any("empty point cloud" in n for n in d.notes)
    assert any(n.startswith("skipped 1 unregistered images") and "unposed.png" in n
               for n in d.notes)
    (tmp_path / "sparse" / "0" / "points3D.bin").unlink()
    d = load_dataset(tmp_path)
    assert d.points is None and any("no points3D" in n for n in d.notes)
    lo, hi = d.bounds()
    assert np.all(np.isfinite(lo)) and np.all(lo < hi)


def test_error_bad_transforms(tmp_path):
    (tmp_path / "transforms.json").write_text("{ nope")
    with pytest.raises(DatasetError, match="invalid JSON"):
        load_dataset(tmp_path)
    meta = {"camera_angle_x": 0.7, "frames": [{"file_path": "x/missing", "transform_matrix":
                                               gl_pose((1, 2, 3))}]}
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="1 images referenced .* missing: x/missing"):
        load_dataset(tmp_path)
    del meta["camera_angle_x"]
    meta["frames"][0]["file_path"] = "a.png"
    save_png(tmp_path / "a.png", np.zeros((4, 4, 3), np.uint8))
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="frame 0: no focal length"):
        load_dataset(tmp_path)
    meta["frames"][0]["fl_x"] = "wide"
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match='^transforms.json frame 0: fl_x must be a finite '
                                           'number, got "wide"$'):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="pass the scene folder"):
        make_colmap(tmp_path / "s", np.random.default_rng(0), images=False)
        load_dataset(tmp_path / "s" / "sparse" / "0")


# ------------------------------------------------------------------------------------- validation

@pytest.mark.parametrize("change, message", [
    ({"fl_x": float("nan")}, "frame 0: fl_x must be a finite number, got NaN"),  # json's NaN
    ({"cy": float("inf")}, "frame 0: cy must be a finite number, got Infinity"),
    ({"fl_x": -40.0}, "frame 0: focal lengths must be positive"),
    ({"w": 0}, "is 30x20 but the camera in transforms.json is 0x20"),
    ({"transform_matrix": np.zeros((4, 4)).tolist()}, "frame 0: transform_matrix has a degenerate rotation"),
    ({"transform_matrix": np.full((4, 4), np.nan).tolist()}, "frame 0: transform_matrix must be a finite"),
])
def test_transforms_cameras_must_be_finite_and_sane(tmp_path, change, message):
    save_png(tmp_path / "a.png", np.full((20, 30, 3), 128, np.uint8))
    frame = {"file_path": "a.png", "transform_matrix": gl_pose((0, -5, 0)), "fl_x": 40.0, **change}
    (tmp_path / "transforms.json").write_text(json.dumps({"frames": [frame]}))
    with pytest.raises(DatasetError, match=re.escape(message)) as e:
        load_dataset(tmp_path)
    _one_line(e)


def test_colmap_poses_intrinsics_and_points_must_be_finite(tmp_path, rng):
    cams, imgs, pts = make_colmap(tmp_path, rng)
    model_dir = tmp_path / "sparse" / "0"

    def rewrite(image_change=None, camera_change=None):
        i = {k: v for k, v in imgs.items()}
        c = {k: v for k, v in cams.items()}
        if image_change:
            i[2] = image_change(i[2])
        if camera_change:
            c[1] = camera_change(c[1])
        write_colmap_bin(model_dir, c, i, pts)

    for change, message in [
        (lambda im: (np.array([np.nan, 0, 0, 1.0]), *im[1:]), "image img_01.png, camera 2: quaternion (nan"),
        (lambda im: (np.zeros(4), *im[1:]), "image img_01.png, camera 2: quaternion (0.0, 0.0, 0.0, 0.0) is not a rotation"),
        (lambda im: (im[0], np.array([0, np.inf, 0]), *im[2:]), "image img_01.png, camera 2: the pose"),
    ]:
        rewrite(image_change=change)
        with pytest.raises(DatasetError, match=re.escape(message)) as e:
            load_dataset(tmp_path)
        _one_line(e)
    rewrite(camera_change=lambda c: (c[0], c[1], [np.nan, 52.0, 20.5, 14.5]))
    with pytest.raises(DatasetError, match="image img_00.png, camera 1: intrinsics must be finite"):
        load_dataset(tmp_path)
    xyz, rgb, err = pts
    xyz = xyz.copy()
    xyz[3, 1] = np.nan
    write_colmap_bin(model_dir, cams, imgs, (xyz, rgb, err))
    d = load_dataset(tmp_path)
    assert len(d.points) == len(xyz) - 1 and np.all(np.isfinite(d.points))
    assert any(n.startswith("dropped 1 of 20 points of sparse/0 with non-finite") for n in d.notes)


def test_downscale_that_leaves_no_image_is_refused(tmp_path, rng):
    make_colmap(tmp_path, rng, size=(40, 30))
    assert load_dataset(tmp_path, resolution=3).cameras[0].height == 10
    with pytest.raises(DatasetError, match=r"-r 100000 would shrink the 40x30 images to 1x1 px; "
                                           r"at most -r 4 keeps them 8 px on a side"):
        load_dataset(tmp_path, resolution=100000)


def test_preload_decodes_everything_first_and_keeps_8_bit(tmp_path, rng):
    make_colmap(tmp_path, rng, n_images=9, size=(40, 30))
    d = load_dataset(tmp_path, eval_split=True)
    cold = [d.load_image(i) for i in range(9)]
    ticks = []
    d.preload(progress=ticks.append, test_budget=0)
    assert sum(ticks) == 9 and d.stats["decoded"] == 9 + 9
    assert sorted(d.resident) == d.train_indices                 # test views: beyond the budget
    assert all(a.dtype == np.uint8 for a in d.resident.values())  # a quarter of float32
    for i in range(9):
        assert np.array_equal(d.load_image(i), cold[i])           # served identically
    bad = tmp_path / "images" / "img_08.png"
    bad.write_bytes(bad.read_bytes()[:60])                        # a truncated file
    with pytest.raises(DatasetError, match="cannot decode image .*img_08.png") as e:
        load_dataset(tmp_path, eval_split=True).preload()
    _one_line(e)


# ------------------------------------------------------------------------------------------ cache

def test_cache_reuse_and_invalidation(tmp_path, rng):
    make_colmap(tmp_path / "scene", rng, size=(64, 48), models=[("PINHOLE", [60, 60, 32, 24])])
    first = load_dataset(tmp_path / "scene", resolution=2)
    a = first.load_image(0)
    assert first.stats == {"decoded": 1, "cache_hits": 0, "cache_writes": 1}
    assert first.cache_dir == tmp_path / "scene" / ".wgsl_splat_cache" / "r2"
    (entry,) = first.cache_dir.glob("img_00-*.png")
    mtime = entry.stat().st_mtime_ns
    second = load_dataset(tmp_path / "scene", resolution=2)
    assert np.array_equal(second.load_image(0), a)
    assert second.stats == {"decoded": 0, "cache_hits": 1, "cache_writes": 0}
    assert entry.stat().st_mtime_ns == mtime
    src = Path(second.sources[0].path)
    save_png(src, np.full((48, 64, 3), 7, np.uint8))
    os.utime(src, ns=(mtime + 10**9, mtime + 10**9))
    third = load_dataset(tmp_path / "scene", resolution=2)
    assert np.allclose(third.load_image(0), 7 / 255) and third.stats["decoded"] == 1
    assert [p.name for p in third.cache_dir.glob("img_00-*.png")] != [entry.name]
    assert len(list(third.cache_dir.glob("img_00-*.png"))) == 1  # the stale entry is gone


def test_cache_falls_back_when_scene_is_read_only(tmp_path, rng, private_user_cache):
    scene = tmp_path / "scene"
    make_colmap(scene, rng, size=(64, 48), models=[("PINHOLE", [60, 60, 32, 24])])
    scene.chmod(0o555)
    try:
        d = load_dataset(scene, resolution=2)
        d.load_image(0)
        assert private_user_cache in d.cache_dir.parents
        assert not (scene / ".wgsl_splat_cache").exists()
        again = load_dataset(scene, resolution=2)
        again.load_image(0)
        assert again.stats["cache_hits"] == 1
    finally:
        scene.chmod(stat.S_IRWXU)
    explicit = load_dataset(scene, resolution=2, cache_dir=tmp_path / "mine")
    explicit.load_image(0)
    assert explicit.cache_dir == tmp_path / "mine" / "r2"


# ------------------------------------------------------------------------------ image primitives

def test_resize_area_is_exact_box_average(rng):
    a = rng.uniform(size=(8, 12, 3))
    assert np.allclose(resize_area(a, 4, 3), a.reshape(4, 2, 3, 4, 3).mean((1, 3)), atol=1e-6)
    assert np.allclose(resize_area(np.array([[1.0, 2.0, 4.0]]), 1, 2), [[4 / 3, 10 / 3]])
    b = rng.uniform(size=(7, 11))
    out = resize_area(b, 3, 4)

    def weights(n_in, n_out):  # overlap of output pixel k with input pixel j, brute force
        e = np.arange(n_out + 1) * n_in / n_out
        j = np.arange(n_in)
        return np.clip(np.minimum(e[1:, None], j + 1) - np.maximum(e[:-1, None], j), 0, None) \
            * n_out / n_in

    assert np.allclose(out, weights(7, 3) @ b @ weights(11, 4).T, atol=1e-6)
    assert out.mean() == pytest.approx(b.mean(), abs=1e-6)


def test_undistort_recovers_pinhole_image():
    """Render a smooth pattern through a distorted lens, undistort, compare with the pinhole
    view."""
    w, h, fx, fy, cx, cy = 160, 120, 150.0, 155.0, 81.3, 58.7
    dist = Distortion((0.08, -0.03), 0.002, -0.0015)

    def pattern(u, v):  # a function of undistorted pixel position
        return 0.5 + 0.2 * np.sin(2 * np.pi * u / 37) + 0.2 * np.cos(2 * np.pi * v / 29)

    ud, vd = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    xd, yd = (ud - cx) / fx, (vd - cy) / fy
    x, y = xd.copy(), yd.copy()
    for _ in range(50):  # invert the distortion by fixed-point iteration (test only)
        px, py = dist.apply(x, y)
        x, y = x + xd - px, y + yd - py
    assert np.abs(np.stack(dist.apply(x, y)) - np.stack([xd, yd])).max() < 1e-10
    distorted = pattern(fx * x + cx, fy * y + cy)[:, :, None].repeat(3, 2).astype(np.float32)
    out = undistort_image(distorted, fx, fy, cx, cy, dist)[:, :, 0]
    truth = pattern(ud, vd)
    sx, sy = dist.apply((ud - cx) / fx, (vd - cy) / fy)
    px, py = fx * sx + cx, fy * sy + cy
    valid = (px > 1) & (px < w - 1) & (py > 1) & (py < h - 1)
    assert valid.mean() > 0.9
    assert np.abs(out - truth)[valid].max() < 4e-3
    assert np.abs(distorted[:, :, 0] - truth)[valid].max() > 0.05  # the lens did matter
    assert np.abs(out - pattern(ud + 0.5, vd))[valid].max() > 0.01  # half-pixel shifts show up


def test_colmap_image_name_used_twice_is_refused(tmp_path, rng):
    """Two registered images of one file: an error naming it, not a silent 'unregistered' image."""
    cams, imgs, pts = make_colmap(tmp_path, rng, n_images=3)
    imgs[3] = imgs[3][:3] + (imgs[2][3],) + imgs[3][4:]     # image 3 also claims img_01.png
    write_colmap_bin(tmp_path / "sparse" / "0", cams, imgs, pts)
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    assert "images 2 and 3 are both named 'img_01.png'" in _one_line(e)


@pytest.mark.parametrize("ci", ["", "true"])
def test_missing_real_data_skips_in_one_line_and_fails_under_ci(tmp_path, ci):
    """The real scenes live outside the repository ($WGSL_SPLAT_DATA, default ../shared/data):
    absent, the tests that need them are skipped with one line saying what is missing and how to
    get it; under CI=true that fails the run, so the quality tests never silently stop running."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(WGSL_SPLAT_DATA=str(tmp_path), **({"CI": ci} if ci else {}))
    test = Path(__file__).with_name("test_datasets.py")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        f"{test}::test_fox_r4_undistorted_cameras_look_at_common_point"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    line = (f"real test scene 'fox' not found at {tmp_path / 'fox'}: set WGSL_SPLAT_DATA (or "
            f"pytest --data-dir) to the folder holding mouse/, fox/, lego/")
    assert line in r.stdout, r.stdout
    if ci:
        assert r.returncode == 1 and "CI=true, so a missing data folder fails the run" in r.stdout
    else:
        assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout


# ------------------------------------------------------------------ transforms.json: types, twins

def _frames_scene(root: Path, rng, n=4):
    """``n`` distinct photos a{k}.png with frames on a circle; the meta dict, unwritten."""
    frames = []
    for k in range(n):
        save_png(root / f"a{k}.png", rng.integers(0, 256, (20, 30, 3), dtype=np.uint8))
        angle = 2 * np.pi * k / n + rng.uniform(0, 0.3)
        frames.append({"file_path": f"a{k}.png",
                       "transform_matrix": gl_pose((4 * np.cos(angle), 4 * np.sin(angle), 1))})
    return {"fl_x": 40.0, "w": 30, "h": 20, "frames": frames}


@pytest.mark.parametrize("key, value, shown, kind", [
    ("is_fisheye", "false", '"false"', "true or false (a JSON boolean)"),  # bool("false") is True
    ("is_fisheye", 0, "0", "true or false (a JSON boolean)"),
    ("fl_x", True, "true", "a finite number"),
    ("cx", "15", '"15"', "a finite number"),
    ("k1", [0.1], "[0.1]", "a finite number"),
    ("w", 30.5, "30.5", "a whole number"),
    ("camera_model", 1, "1", "a string"),
    ("file_path", 7, "7", "a string"),
    ("mask_path", {"x": 1}, '{"x": 1}', "a string"),
])
def test_transforms_values_of_the_wrong_type_are_refused_naming_key_and_frame(tmp_path, rng, key,
                                                                              value, shown, kind):
    meta = _frames_scene(tmp_path, rng)
    k = int(rng.integers(len(meta["frames"])))
    meta["frames"][k][key] = value
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    assert _one_line(e) == f"transforms.json frame {k}: {key} must be {kind}, got {shown}"


@pytest.mark.parametrize("key, value, kind", [
    ("is_fisheye", "false", "true or false (a JSON boolean)"),
    ("fl_y", "40", "a finite number"), ("h", "20", "a whole number"),
    ("aabb_scale", "4", "a finite number"), ("ply_file_path", 3, "a string")])
def test_transforms_file_level_values_are_type_checked_too(tmp_path, rng, key, value, kind):
    meta = _frames_scene(tmp_path, rng, n=2)
    meta[key] = value
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    assert _one_line(e) == f"transforms.json: {key} must be {kind}, got {json.dumps(value)}"
    meta[key] = None          # null: as if absent
    meta["is_fisheye"] = False
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    d = load_dataset(tmp_path)
    assert all(s.distortion is None for s in d.sources)   # pinhole, not undistorted as a fisheye


def test_transforms_image_with_two_frames_is_refused(tmp_path, rng):
    """COLMAP's two images of one name are refused; so are two frames of one image file, however
    spelled: with two poses one is wrong, listed twice it trains twice and is scored once."""
    meta = _frames_scene(tmp_path, rng)
    i, j = sorted(rng.choice(len(meta["frames"]), 2, replace=False).tolist())
    twin = dict(meta["frames"][i])
    meta["frames"][j] = twin                       # listed twice: same file, same pose
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    assert _one_line(e) == (f"transforms.json frame {i} and transforms.json frame {j} both list "
                            f"the image a{i}.png ('a{i}.png'): a frame listed twice is trained "
                            f"twice and scored once; remove one from transforms.json")
    (tmp_path / "sub").mkdir()
    meta["frames"][j] = {"file_path": f"./sub/../a{i}",      # the same file, spelled otherwise
                         "transform_matrix": gl_pose((0.5, -4, 2))}
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    assert _one_line(e) == (f"transforms.json frame {i} and transforms.json frame {j} both use "
                            f"the image a{i}.png ('a{i}.png' and './sub/../a{i}') with different "
                            f"poses: each frame needs its own image file; fix or re-export "
                            f"transforms.json")


def test_blender_test_frame_of_a_training_image_is_refused(tmp_path):
    make_blender(tmp_path)
    test = json.loads((tmp_path / "transforms_test.json").read_text())
    test["frames"][1]["file_path"] = "train/r_0.png"
    (tmp_path / "transforms_test.json").write_text(json.dumps(test))
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path, eval_split=True)
    assert _one_line(e).startswith("transforms_train.json frame 0 and transforms_test.json frame 1 "
                                   "both use the image train/r_0.png ('./train/r_0' and "
                                   "'train/r_0.png') with different poses")
