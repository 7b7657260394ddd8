"""The preview window under Xvfb on the test adapter: the presented image equals the offscreen
render, input moves the camera, closing it never stops training, and no display is a clear error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from wgsl_splat.app.cli import main
from wgsl_splat.app.view_camera import OrbitCamera
from wgsl_splat.data.ply import save_ply
from wgsl_splat.gpu.renderer import GpuRenderer
from wgsl_splat.tools.random_scene import random_scene


@pytest.fixture(scope="module")
def display():
    """An X display: the session's own, or an Xvfb started here (CI installs xvfb). Fails, never
    skips, when there is neither."""
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.fail("the viewer tests need an X display or Xvfb (Debian: apt-get install xvfb)",
                    pytrace=False)
    for num in range(90, 110):
        if not os.path.exists(f"/tmp/.X11-unix/X{num}") and not os.path.exists(f"/tmp/.X{num}-lock"):
            break
    proc = subprocess.Popen([xvfb, f":{num}", "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(f"/tmp/.X11-unix/X{num}"):
            break
        time.sleep(0.05)
    os.environ["DISPLAY"] = f":{num}"
    try:
        yield os.environ["DISPLAY"]
    finally:
        import glfw

        glfw.terminate()        # before the server goes: Xlib exits the process on a lost display
        del os.environ["DISPLAY"]
        proc.terminate()
        proc.wait(5)


@pytest.fixture
def scene():
    rng = np.random.default_rng(5)
    model, cam = random_scene(rng, 300, 160, 120, sh_degree=1, edge_cases=False, dtype=np.float32)
    return model, cam


@pytest.fixture
def presents(gpu_ctx):
    """The default adapter can present a window; skipped with its reason when it cannot (wgpu's
    OpenGL adapter)."""
    from wgsl_splat.app.viewer import window_refused

    why = window_refused(gpu_ctx)
    if why:
        pytest.skip(why)


def make_viewer(gpu_ctx, model, cam, **kw):
    from wgsl_splat.app.viewer import Viewer

    renderer = GpuRenderer(gpu_ctx)
    renderer.upload_model(model)
    orbit = OrbitCamera.from_camera(cam, 4.0)
    return Viewer(renderer, orbit, size=(160, 120), **kw), renderer


def test_window_image_matches_the_offscreen_render(display, gpu_ctx, presents, scene):
    model, cam = scene
    viewer, renderer = make_viewer(gpu_ctx, model, cam, background=(0.1, 0.2, 0.3))
    try:
        viewer.capture_next_frame()
        assert viewer.frame()
        shot = viewer.last_capture
        h, w, _ = shot.shape
        offscreen = renderer.render(viewer.orbit.camera(w, h), (0.1, 0.2, 0.3))
        expect = np.clip(offscreen, 0, 1) * 255.0
        diff = np.abs(shot.astype(np.float64) - expect)
        assert diff.max() <= 1.0, f"window differs from the offscreen render by {diff.max()} levels"
        assert shot.std() > 5, "the frame is flat: nothing was drawn"
    finally:
        viewer.close()


def test_input_events_move_the_camera(display, gpu_ctx, presents, scene, tmp_path):
    import glfw

    model, cam = scene
    other = OrbitCamera.from_camera(cam, 4.0).camera(160, 120)
    other.world_to_camera[:3, 3] += [0.5, 0.0, 0.0]          # a second "dataset camera"
    viewer, _ = make_viewer(gpu_ctx, model, cam, cameras=[other], screenshot_dir=str(tmp_path))
    win = viewer.window
    try:
        viewer.frame()
        eye0, target0, dist0 = viewer.orbit.eye.copy(), viewer.orbit.target.copy(), viewer.orbit.distance
        # left drag: orbit around the target, distance kept
        viewer._cursor = (50.0, 50.0)
        viewer._drag = None
        viewer._on_mouse_button(win, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)
        viewer._cursor = (50.0, 50.0)
        viewer._on_cursor_pos(win, 90.0, 70.0)
        viewer._on_mouse_button(win, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)
        assert np.linalg.norm(viewer.orbit.eye - eye0) > 0.05
        assert np.allclose(viewer.orbit.target, target0) and abs(viewer.orbit.distance - dist0) < 1e-9
        # right drag: pan moves eye and target together
        viewer._on_mouse_button(win, glfw.MOUSE_BUTTON_RIGHT, glfw.PRESS, 0)
        viewer._cursor = (0.0, 0.0)
        viewer._on_cursor_pos(win, 30.0, 0.0)
        viewer._on_mouse_button(win, glfw.MOUSE_BUTTON_RIGHT, glfw.RELEASE, 0)
        assert np.linalg.norm(viewer.orbit.target - target0) > 1e-3
        # wheel: closer
        d = viewer.orbit.distance
        viewer._on_scroll(win, 0.0, 2.0)
        assert viewer.orbit.distance < d
        # W held for a few frames: fly forward
        eye = viewer.orbit.eye.copy()
        forward = viewer.orbit.axes()[0]
        viewer._on_key(win, glfw.KEY_W, 0, glfw.PRESS, 0)
        for _ in range(3):
            time.sleep(0.02)
            viewer.frame(draw=False)
        viewer._on_key(win, glfw.KEY_W, 0, glfw.RELEASE, 0)
        assert np.dot(viewer.orbit.eye - eye, forward) > 0
        # N: the dataset camera; R: back home
        viewer._on_key(win, glfw.KEY_N, 0, glfw.PRESS, 0)
        assert np.allclose(viewer.orbit.eye, other.center)
        viewer._on_key(win, glfw.KEY_R, 0, glfw.PRESS, 0)
        assert np.allclose(viewer.orbit.eye, eye0) and np.allclose(viewer.orbit.target, target0)
        # P: screenshot of the next frame
        viewer._on_key(win, glfw.KEY_P, 0, glfw.PRESS, 0)
        viewer.frame()
        shots = list(tmp_path.glob("screenshot_*.png"))
        assert len(shots) == 1 and shots[0].stat().st_size > 1000
        # Esc closes
        viewer._on_key(win, glfw.KEY_ESCAPE, 0, glfw.PRESS, 0)
        assert not viewer.frame() and viewer.closed
    finally:
        viewer.close()


def test_view_command_screenshot(display, presents, tmp_path, scene):
    model, _ = scene
    save_ply(tmp_path / "m.ply", model)
    out = tmp_path / "shot.png"
    res = CliRunner().invoke(main, ["view", str(tmp_path / "m.ply"), "--size", "200x150",
                                    "--screenshot", str(out)])
    assert res.exit_code == 0, res.output
    import imageio.v3 as iio

    assert iio.imread(out).shape == (150, 200, 3)


def test_view_without_display_is_a_clear_error(tmp_path, scene):
    model, _ = scene
    save_ply(tmp_path / "m.ply", model)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    res = subprocess.run([sys.executable, "-m", "wgsl_splat", "view", str(tmp_path / "m.ply")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "no display" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.gpu
def test_train_preview_without_display_warns_and_trains(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    res = CliRunner().invoke(main, ["train", "--preset", "smoke", "--iters", "6", "--out",
                                    str(tmp_path), "--preview", "--eval-at", "6"])
    assert res.exit_code == 0, res.output
    assert "--preview ignored: no display" in res.output
    assert (tmp_path / "point_cloud" / "iteration_6" / "point_cloud.ply").is_file()


def test_closing_the_preview_does_not_stop_training(display, presents, tmp_path, monkeypatch):
    import glfw

    from wgsl_splat.app import viewer as viewer_module

    opened = []
    real_init = viewer_module.TrainingPreview.__init__

    def spy_init(self, *a, **kw):
        real_init(self, *a, **kw)
        self.budget = 10.0          # draw every step here: the test wants frames, not speed
        self.min_interval = 0.0
        opened.append(self)

    real_on_step = viewer_module.TrainingPreview.on_step

    def on_step(self, it, trainer):
        real_on_step(self, it, trainer)
        if it == 4:                 # the user closes the window mid-run
            glfw.set_window_should_close(self.viewer.window, True)

    monkeypatch.setattr(viewer_module.TrainingPreview, "__init__", spy_init)
    monkeypatch.setattr(viewer_module.TrainingPreview, "on_step", on_step)
    res = CliRunner().invoke(main, ["train", "--preset", "smoke", "--iters", "10", "--out",
                                    str(tmp_path), "--preview", "--eval-at", "10"])
    assert res.exit_code == 0, res.output
    assert opened and opened[0].viewer.closed and opened[0].viewer.frames >= 3
    assert "preview window closed at step 5" in (tmp_path / "train.log").read_text()
    assert (tmp_path / "point_cloud" / "iteration_10" / "point_cloud.ply").is_file()
    assert Path(tmp_path / "checkpoints").is_dir()


def test_view_command_renders_in_the_models_mode(display, gpu_ctx, presents, tmp_path, scene):
    """An antialiased PLY is shown antialiased (its screenshot is the antialiased offscreen render,
    not the classic one); --classic overrides it with a warning."""
    import imageio.v3 as iio

    from wgsl_splat.render_config import ANTIALIASED, CLASSIC

    model, _ = scene
    model = model.copy()
    model.log_scales -= 2.5      # sub-pixel Gaussians: where the two modes differ most
    save_ply(tmp_path / "aa.ply", model, "antialiased")
    cam = OrbitCamera.for_points(model.means).camera(200, 150)
    renders = {}
    for config in (ANTIALIASED, CLASSIC):
        r = GpuRenderer(gpu_ctx, config=config)
        r.upload_model(model)
        renders[config.mode] = np.clip(r.render(cam), 0, 1)
    for flag, mode in (([], "antialiased"), (["--classic"], "classic")):
        out = tmp_path / f"{mode}.png"
        res = CliRunner().invoke(main, ["view", str(tmp_path / "aa.ply"), "--size", "200x150",
                                        "--screenshot", str(out)] + flag)
        assert res.exit_code == 0, res.output
        assert ("Warning: the model was trained antialiased" in res.output) == bool(flag)
        shot = iio.imread(out).astype(np.float64) / 255.0
        other = "classic" if mode == "antialiased" else "antialiased"
        err, err_other = (np.abs(shot - renders[m]).max() for m in (mode, other))
        assert err <= 1.5 / 255 < err_other, (mode, err, err_other)


def test_view_on_an_adapter_that_cannot_present_is_one_line(display, tmp_path, scene):
    """wgpu's OpenGL adapter aborted the process configuring the window's surface: refused."""
    from wgsl_splat.gpu.runtime import list_adapters

    if not any(a.info.get("backend_type") == "OpenGL" for a in list_adapters()):
        pytest.skip("no OpenGL adapter here (Mesa's llvmpipe gives one beside lavapipe)")
    model, _ = scene
    save_ply(tmp_path / "m.ply", model)
    res = subprocess.run([sys.executable, "-m", "wgsl_splat", "view", str(tmp_path / "m.ply"),
                          "--adapter", "OpenGL", "--screenshot", str(tmp_path / "s.png")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "the window cannot present from wgpu's OpenGL adapter" in res.stderr


def test_view_of_a_run_opens_through_its_first_training_camera(display, presents, tmp_path, scene):
    """``view PLY`` of a run, without --data, finds the run's cameras.json and starts through its
    first training camera (here tilted about its view axis, and listed after a held-out one): the
    first frame is what ``render --camera cameras.json`` writes for that camera, to the 8-bit
    rounding of the window and the PNG (measured: at most 1 level)."""
    import imageio.v3 as iio

    from wgsl_splat.camera import CAMERAS_FILE, Camera, cameras_to_json

    model, cam = scene
    a = np.radians(15.0)
    turn = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    w2c = cam.world_to_camera.copy()
    w2c[:3, :3] = turn @ cam.rotation
    w2c[:3, 3] = -w2c[:3, :3] @ cam.center
    tilted = Camera(w2c, cam.fx, cam.fy, cam.cx, cam.cy, cam.width, cam.height, "tilted")
    held_out = Camera(cam.world_to_camera, cam.fx, cam.fy, cam.cx, cam.cy, cam.width, cam.height,
                      "held_out")
    run = tmp_path / "run"
    ply = run / "point_cloud" / "iteration_30" / "point_cloud.ply"
    ply.parent.mkdir(parents=True)
    save_ply(ply, model)
    (run / CAMERAS_FILE).write_text(json.dumps(cameras_to_json([held_out, tilted], [1])))
    shot = tmp_path / "first.png"
    res = CliRunner().invoke(main, ["view", str(ply), "--size", f"{cam.width}x{cam.height}",
                                    "--screenshot", str(shot)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["render", str(ply), "--camera", str(run / CAMERAS_FILE),
                                    "--out", str(tmp_path / "ref")])
    assert res.exit_code == 0, res.output
    seen = iio.imread(shot).astype(np.float64)
    want, other = (iio.imread(tmp_path / "ref" / f"{n}.png")[..., :3].astype(np.float64)
                   for n in ("tilted", "held_out"))
    assert seen.shape == want.shape and seen.std() > 5
    assert np.abs(seen - want).max() <= 1.0
    assert np.abs(seen - other).mean() > 5.0      # the tilt shows: not the held-out camera
