"""The viewers open on the capture as it was shot: a run's cameras travel with its model
(``cameras.json``, 3DGS's layout, written by the trainer and read back), ``view`` of a PLY finds
them beside it or in its run folder and starts through the first training camera with the
capture's up, and the web viewer's frusta never cover the view they belong to. No window here
(tests/test_viewer.py compares the first frame itself with ``render``)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from external_tools import missing

from wgsl_splat.app.common import load_cameras_json
from wgsl_splat.app.view import ViewRequest, view_cameras
from wgsl_splat.app.view_camera import capture_up, run_cameras_path, start_view
from wgsl_splat.app.web_viewer import frustum_depth, near_eye
from wgsl_splat.atomic_io import WriteRecord
from wgsl_splat.camera import CAMERAS_FILE, Camera, cameras_to_json
from wgsl_splat.data.default_scene import default_dataset
from wgsl_splat.reference.step import CpuTrainStep
from wgsl_splat.training.config import preset
from wgsl_splat.training.trainer import Trainer


def rolled(cam: Camera, degrees: float) -> Camera:
    """``cam`` turned about its view axis (a photo held askew)."""
    a = math.radians(degrees)
    turn = np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0],
                     [0.0, 0.0, 1.0]])
    w2c = cam.world_to_camera.copy()
    w2c[:3, :3] = turn @ cam.rotation
    w2c[:3, 3] = -w2c[:3, :3] @ cam.center
    return Camera(w2c, cam.fx, cam.fy, cam.cx, cam.cy, cam.width, cam.height, cam.name)


def ring(n: int = 8, roll: float = 12.0) -> list[Camera]:
    """``n`` cameras on a ring around the origin looking at it, world-up -y, each tilted."""
    cams = []
    for i in range(n):
        a = 2 * math.pi * i / n
        eye = (4 * math.cos(a), -1.0, 4 * math.sin(a))
        cam = Camera.look_at(eye, (0.0, 0.0, 0.0), (0.0, -1.0, 0.0), fov_x_deg=50, width=120,
                             height=90, name=f"view_{i:02d}.png")
        cams.append(rolled(cam, roll * (-1) ** i))
    return cams


def test_cameras_json_round_trip(tmp_path):
    cams = ring(5)
    cams[3] = Camera(cams[3].world_to_camera, 100.0, 104.0, 57.5, 47.0, 120, 90, "sub/odd.jpg")
    raw = cameras_to_json(cams, [1, 2, 4])
    # 3DGS's layout: position the centre, rotation camera-to-world (its columns the camera axes)
    for key in ("id", "img_name", "width", "height", "position", "rotation", "fx", "fy"):
        assert key in raw[0], key
    np.testing.assert_allclose(raw[2]["position"], cams[2].center, atol=1e-12)
    np.testing.assert_allclose(np.array(raw[2]["rotation"])[:, 2], cams[2].rotation[2], atol=1e-12)
    assert [e["split"] for e in raw] == ["test", "train", "train", "test", "train"]
    path = tmp_path / CAMERAS_FILE
    path.write_text(json.dumps(raw))
    back, train = load_cameras_json(path)
    assert train == [1, 2, 4]
    for a, b in zip(back, cams):
        np.testing.assert_allclose(a.world_to_camera, b.world_to_camera, atol=1e-12)
        assert (a.fx, a.fy, a.cx, a.cy, a.width, a.height, a.name) == \
            (b.fx, b.fy, b.cx, b.cy, b.width, b.height, b.name)
    # a camera given by its world_to_camera, without a split or a principal point, reads too
    path.write_text(json.dumps(dict(world_to_camera=cams[0].world_to_camera.tolist(), fx=90.0,
                                    fy=90.0, width=120, height=90)))
    (one,), train = load_cameras_json(path)
    assert train == [0] and (one.cx, one.cy) == (60.0, 45.0)
    np.testing.assert_allclose(one.world_to_camera, cams[0].world_to_camera)


def test_the_trainer_writes_the_runs_cameras(tmp_path):
    """At the run's start, in the run folder (as 3DGS), every training and held-out camera, in
    the write record."""
    data = default_dataset(resolution=6, eval_split=True, num_cameras=16, num_points=600)
    cfg = preset("smoke")
    cfg.iters, cfg.eval_at, cfg.save_at = 2, (2,), (2,)
    trainer = Trainer(data, cfg, str(tmp_path), lambda a, s: CpuTrainStep(a, spec=s),
                      log=lambda m: None)
    try:
        trainer.setup(None)
    finally:
        trainer.close()
    path = tmp_path / CAMERAS_FILE
    cams, train = load_cameras_json(path)
    assert train == list(data.train_indices) and data.test_indices
    assert len(cams) == len(data.cameras)
    for a, b in zip(cams, data.cameras):
        np.testing.assert_allclose(a.world_to_camera, b.world_to_camera, atol=1e-12)
        assert (a.fx, a.fy, a.cx, a.cy, a.width, a.height) == (b.fx, b.fy, b.cx, b.cy, b.width,
                                                              b.height)


def test_the_written_cameras_are_recorded(tmp_path):
    from wgsl_splat.atomic_io import start_recording, stop_recording, write_json

    record = WriteRecord(tmp_path)
    start_recording(record)
    try:
        data = default_dataset(resolution=8, eval_split=True, num_cameras=8, num_points=100)
        write_json(tmp_path / CAMERAS_FILE, cameras_to_json(data.cameras, data.train_indices))
    finally:
        stop_recording(record)
    assert WriteRecord(tmp_path).owns(tmp_path / CAMERAS_FILE)


def test_a_models_cameras_are_found_beside_it_or_in_its_run(tmp_path):
    run = tmp_path / "run"
    ply = run / "point_cloud" / "iteration_7000" / "point_cloud.ply"
    ply.parent.mkdir(parents=True)
    ply.write_bytes(b"")
    assert run_cameras_path(ply) is None
    (run / CAMERAS_FILE).write_text("[]")
    assert run_cameras_path(ply) == str(run / CAMERAS_FILE)
    (ply.parent / CAMERAS_FILE).write_text("[]")          # one that travels with the PLY itself
    assert run_cameras_path(ply) == str(ply.parent / CAMERAS_FILE)
    other = tmp_path / "elsewhere" / "deeper" / "model.ply"   # not a run's layout: no climbing
    other.parent.mkdir(parents=True)
    (tmp_path / CAMERAS_FILE).write_text("[]")
    assert run_cameras_path(other) is None


def test_view_of_a_run_starts_through_its_first_training_camera(tmp_path):
    cams = ring(8, roll=12.0)
    train = [2, 3, 5, 6, 7]                    # 0, 1 and 4 held out
    run = tmp_path / "run"
    ply = run / "point_cloud" / "iteration_30" / "point_cloud.ply"
    ply.parent.mkdir(parents=True)
    ply.write_bytes(b"")
    (run / CAMERAS_FILE).write_text(json.dumps(cameras_to_json(cams, train)))

    found, found_train = view_cameras(ViewRequest(model_path=str(ply)), (0.0, 0.0, 0.0))
    assert found_train == train and len(found) == 8
    points = np.random.default_rng(1).normal(size=(500, 3)) * 0.3
    orbit, first = start_view(found, found_train, points)
    assert first == 2
    # the first view is the camera itself, its tilt included, at the camera's size
    view = orbit.camera(120, 90)
    np.testing.assert_allclose(view.world_to_camera, cams[2].world_to_camera, atol=1e-9)
    assert math.isclose(view.fx, cams[2].fx, rel_tol=1e-9) and view.cx == cams[2].cx
    # orbiting turns about the capture's up (not the tilted camera's), the tilt kept
    up = capture_up(found)
    np.testing.assert_allclose(up, (0.0, -1.0, 0.0), atol=1e-9)
    np.testing.assert_allclose(orbit.up, up, atol=1e-12)
    orbit.orbit(0.7, 0.0)
    turned = orbit.camera(120, 90)
    level = -turned.rotation[1] - (-turned.rotation[1] @ turned.rotation[2]) * turned.rotation[2]
    tilt = math.degrees(math.atan2(-turned.rotation[0] @ up, level @ up))
    assert abs(abs(tilt) - 12.0) < 1e-6, tilt
    orbit.reset()
    np.testing.assert_allclose(orbit.camera(120, 90).world_to_camera, cams[2].world_to_camera,
                               atol=1e-9)
    # --data wins over the run's cameras; without either, the orbit around the points stays
    data, data_train = view_cameras(ViewRequest(model_path=str(ply), data="default", resolution=8),
                                    (0.0, 0.0, 0.0))
    assert len(data) != 8 and data_train == list(range(len(data)))
    lone = tmp_path / "model.ply"
    lone.write_bytes(b"")
    assert view_cameras(ViewRequest(model_path=str(lone)), (0.0, 0.0, 0.0)) == ([], [])
    assert start_view([], [], points)[1] == -1


@pytest.mark.parametrize("spacing", [0.05, 1.0])
def test_frusta_never_cover_the_view_they_belong_to(spacing):
    """Frusta are shallower than the gap between neighbouring cameras and the scene's distance;
    looking through a camera hides its own frustum and its near neighbours', never the far ones."""
    n = 40
    centers = np.column_stack([np.arange(n) * spacing, np.zeros(n), np.full(n, -5.0)])
    points = np.random.default_rng(0).normal(size=(200, 3))
    depth = frustum_depth(centers, points)
    reach = np.median(np.linalg.norm(centers - np.median(points, axis=0), axis=1))
    assert 0 < depth <= 0.5 * spacing and depth <= 0.1 * reach
    hidden = near_eye(centers, depth, centers[10])
    assert hidden[10] and not hidden[[0, 20, 39]].any()
    # a frustum that is drawn is at least two of its depths away: its outline spans a small part
    # of a 50 degree view, never the whole of it
    assert (np.linalg.norm(centers[~hidden] - centers[10], axis=1) >= 2 * depth).all()


def test_each_browser_hides_the_frusta_near_its_eye():
    """A browser (viser's protocol, no page) gets its own outlines: at first all but the camera the
    page opens through; after it moves to another camera, all but that one; none once unticked."""
    try:
        import msgspec
        import viser
        from viser._messages import ViewerCameraMessage
        from websockets.sync.client import connect
    except ImportError:
        missing("viser", "pip install 'wgsl_splat[web]'")
    from wgsl_splat.app.web_viewer import WebScene, WebViewer, matrix_to_quat

    cams = ring(8)
    warnings = []
    viewer = WebViewer("127.0.0.1", 0, title="t", mode="classic", log=warnings.append,
                       scene=WebScene(cams, points=np.zeros((10, 3)), initial=2))

    def send(ws, cam):
        msg = ViewerCameraMessage(
            wxyz=tuple(matrix_to_quat(cam.rotation.T)), position=tuple(cam.center), fov=0.9,
            near=0.01, far=100.0, image_height=90, image_width=120, look_at=(0.0, 0.0, 0.0),
            up_direction=(0.0, -1.0, 0.0))
        ws.send(msgspec.msgpack.encode(msg.as_serializable_dict()))

    def settled(want) -> bool:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            entries = list(viewer._clients.values())
            if entries and entries[0].shown.tolist() == want:
                return True
            time.sleep(0.05)
        return False

    try:
        with connect(f"ws://127.0.0.1:{viewer.port}", max_size=None, open_timeout=30,
                     subprotocols=[f"viser-v{viser.__version__}"]) as ws:
            send(ws, cams[2])
            assert settled([i != 2 for i in range(8)])
            (entry,) = viewer._clients.values()
            assert [f.visible for f in entry.frusta] == entry.shown.tolist()
            send(ws, cams[5])
            assert settled([i != 5 for i in range(8)])
            viewer._show.value = False
            assert settled([False] * 8)
    finally:
        viewer.close()
    assert not warnings, warnings


def test_the_window_takes_the_shape_of_the_camera_it_opens_through():
    from wgsl_splat.app.view import window_size
    from wgsl_splat.errors import UserError

    portrait, square = (Camera(np.eye(4), 500.0, 500.0, 300.0, 400.0, 600, 800),
                        Camera(np.eye(4), 50.0, 50.0, 25.0, 25.0, 50, 50))
    assert window_size(None, portrait) == (540, 720)
    assert window_size(None, square) == (720, 720)
    assert window_size(None, None) == (960, 720)
    assert window_size("200x150", portrait) == (200, 150)
    with pytest.raises(UserError, match="--size takes WIDTHxHEIGHT"):
        window_size("200", None)
