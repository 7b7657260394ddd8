"""The command line as a user runs it."""

import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from wgsl_splat.app.cli import main


def test_help_lists_commands():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "render" in result.output


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "wgsl_splat", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "Usage" in out.stdout


def test_render_default_scene_writes_pngs(tmp_path):
    import imageio.v3 as iio

    result = CliRunner().invoke(main, ["render", "--out", str(tmp_path), "--limit", "2", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    files = sorted(os.listdir(tmp_path))
    assert files == ["view_000.png", "view_000_gt.png", "view_001.png", "view_001_gt.png"]
    img = iio.imread(tmp_path / "view_000.png")
    gt = iio.imread(tmp_path / "view_000_gt.png")
    assert img.shape == gt.shape == (192, 192, 3)   # the cameras `train` uses on the scene
    # the initial point cloud must render where the ground truth has objects: strong correlation
    corr = np.corrcoef(img.astype(float).ravel(), gt.astype(float).ravel())[0, 1]
    assert corr > 0.5


@pytest.mark.parametrize("args, message", [
    (["render", "missing.ply"], "model file not found"),
    (["render", "--background", "1,2"], "three comma-separated"),
])
def test_bad_input_gives_one_clear_line(args, message, tmp_path):
    result = CliRunner().invoke(main, args + ["--out", str(tmp_path)])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_ply_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.ply"
    bad.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty float x\nend_header\n\0\0\0\0")
    result = CliRunner().invoke(main, ["render", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "lacks properties" in result.output and "Traceback" not in result.output
    assert result.output.count(str(bad)) == 1, result.output   # the path once, not repeated


@pytest.mark.gpu
def test_gradcheck_command_passes_and_fails_loudly():
    from click.testing import CliRunner

    from wgsl_splat.app.cli import main

    runner = CliRunner()
    res = runner.invoke(main, ["gradcheck", "-n", "60", "--width", "40", "--height", "30",
                               "--variants", "default", "--seed", "3"])
    assert res.exit_code == 0, res.output
    for group in ("loss", "screen mean2d", "means", "log_scales", "quats", "opacity_logits", "sh"):
        assert group in res.output
    assert "all passed" in res.output
    res = runner.invoke(main, ["gradcheck", "-n", "60", "--width", "40", "--height", "30",
                               "--variants", "default", "--seed", "3", "--tolerance", "0"])
    assert res.exit_code == 1 and "FAIL" in res.output


@pytest.mark.gpu
def test_bench_command_reports_both_paths_and_writes_json(tmp_path):
    import json

    from click.testing import CliRunner

    from wgsl_splat.app.cli import main

    out = tmp_path / "bench.json"
    res = CliRunner().invoke(main, ["bench", "-n", "300", "--width", "64", "--height", "48",
                                    "--steps", "2", "--warmup", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    r = report["results"][0]
    assert (r["n"], r["width"], r["height"]) == (300, 64, 48)
    gpu, cpu = r["gpu"], r["cpu"]
    assert gpu["step"]["runs"] == 2 and gpu["step"]["median_ms"] > 0 and gpu["host"]["median_ms"] > 0
    assert set(gpu["stages"]) >= {"project", "rasterize", "loss", "raster backward",
                                   "project backward + adam"}      # Adam fused (gpu/adam.py)
    assert gpu["peak_bytes"] > 0 and gpu["bytes_per_gaussian"] == gpu["peak_bytes"] / 300
    # memory per buffer at the peak: the buffers add up to the peak, and the text lists them
    assert sum(size for _, size in gpu["memory"]) == gpu["peak_bytes"]
    assert {"params", "adam_m", "adam_v"} <= {name for name, _ in gpu["memory"]}
    assert "memory at the peak" in res.output and "bytes per Gaussian" in res.output
    assert set(cpu["stages"]) == {"forward", "loss", "backward", "adam"}
    assert report["machine"]["adapter"] and report["machine"]["backend"]
    assert "faster than the NumPy step" in res.output and "Amdahl" in res.output
    lim = report["limits"]
    assert lim["flops"] > 0 and lim["bandwidth"] > 0 and lim["dispatch_s"] > 0
    roof = gpu["roofline"]
    assert set(roof) == set(gpu["stages"])
    for stage, row in roof.items():
        assert row["flop"] >= 0 and row["bytes"] > 0 and row["dispatches"] >= 1, stage
        assert row["floor_ms"] > 0 and row["ratio"] == row["measured_ms"] / row["floor_ms"], stage
    assert "roofline at" in res.output
    res = CliRunner().invoke(main, ["bench", "--preset", "nope"])
    assert res.exit_code == 1 and "unknown preset" in res.output


# ------------------------------------------------------------------- hostile or mistaken input

@pytest.mark.parametrize("args, message", [
    (["--seed", "-1"], "-1 is not in the range x>=0"),
    (["--densify-grad-threshold", "nan"], "nan is not a finite number"),
    (["--lr-scale", "0"], "0.0 is not in the range x>0"),
    (["--eval-at", "-5"], "steps must lie between 1 and 2"),
    (["--cooldown-fraction", "0.9"], "0.9 is not in the range 0.0<=x<=0.5"),
    (["-r", "100000"], "-r 100000 would shrink the 192x192 images to 1x1 px"),
])
def test_train_refuses_bad_numbers_in_one_line(tmp_path, args, message):
    result = CliRunner().invoke(main, ["train", "--iters", "2", "--device", "cpu",
                                       "--out", str(tmp_path / "run"), *args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "run" / "checkpoints").exists()


def test_out_that_cannot_be_created_is_one_line(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    result = CliRunner().invoke(main, ["train", "--iters", "1", "--device", "cpu",
                                       "--out", str(tmp_path / "file" / "run")])
    assert result.exit_code == 1 and "as the output folder: Not a directory" in result.output
    if os.geteuid() != 0:   # root writes into read-only folders anyway
        (tmp_path / "ro").mkdir(mode=0o555)
        result = CliRunner().invoke(main, ["train", "--iters", "1", "--device", "cpu",
                                           "--out", str(tmp_path / "ro" / "run")])
        assert result.exit_code == 1 and "Permission denied" in result.output


def test_render_camera_names_cannot_leave_the_output_folder(tmp_path):
    import json

    from wgsl_splat.camera import Camera

    cam = Camera.look_at((0.0, -3.0, 2.0), (0.0, 0.0, 0.3), (0.0, 0.0, -1.0), width=24, height=16)
    cams = [dict(world_to_camera=cam.world_to_camera.tolist(), fx=cam.fx, fy=cam.fy, cx=cam.cx,
                 cy=cam.cy, width=24, height=16, name=name) for name in ("../../escaped", "/abs/x")]
    (tmp_path / "cams.json").write_text(json.dumps(cams))
    out = tmp_path / "a" / "b"
    result = CliRunner().invoke(main, ["render", "--camera", str(tmp_path / "cams.json"),
                                       "--out", str(out), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(out)) == [".._.._escaped.png", "_abs_x.png"]
    assert not (tmp_path / "escaped.png").exists()


def test_nonfinite_ply_is_refused_or_dropped_by_render(tmp_path):
    from wgsl_splat.data.ply import save_ply
    from wgsl_splat.model import GaussianModel

    model = GaussianModel.random(50, np.random.default_rng(0), sh_degree=0, dtype=np.float32)
    model.means[7] = np.nan
    save_ply(tmp_path / "m.ply", model)
    args = ["render", str(tmp_path / "m.ply"), "--limit", "1", "-r", "8", "--device", "cpu",
            "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "1 of 50 Gaussians have NaN or infinite values (in x y z)" in result.output
    assert "--drop-nonfinite" in result.output
    result = CliRunner().invoke(main, args + ["--drop-nonfinite"])
    assert result.exit_code == 0 and "dropped 1 of 50 Gaussians" in result.output
    assert "Rendered 1 views of 49 Gaussians" in result.output


def test_a_trained_model_renders_from_its_own_datasets_cameras(tmp_path):
    from test_datasets import make_colmap

    make_colmap(tmp_path / "scene", np.random.default_rng(1), size=(48, 32), n_points=60)
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", str(tmp_path / "scene"), "--iters", "2", "-r", "2",
                                       "--device", "cpu", "--out", str(run)])
    assert result.exit_code == 0, result.output
    ply = run / "point_cloud" / "iteration_2" / "point_cloud.ply"
    result = CliRunner().invoke(main, ["render", str(ply), "--data", str(tmp_path / "scene"),
                                       "-r", "2", "--device", "cpu", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    import imageio.v3 as iio

    names = sorted(os.listdir(tmp_path / "r"))
    assert names == [f"img_0{k}{s}.png" for k in range(3) for s in ("", "_gt")]
    assert iio.imread(tmp_path / "r" / "img_01.png").shape == (16, 24, 3)
    assert iio.imread(tmp_path / "r" / "img_01_gt.png").shape == (16, 24, 3)


def test_training_on_a_read_only_dataset_caches_in_the_users_folder(tmp_path, monkeypatch):
    import stat

    from test_datasets import make_colmap

    monkeypatch.delenv("WGSL_SPLAT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user_cache"))
    scene = tmp_path / "scene"
    make_colmap(scene, np.random.default_rng(2), size=(48, 32), n_points=60)
    scene.chmod(0o555)          # the mode bits are honoured even when running as root
    try:
        result = CliRunner().invoke(main, ["train", str(scene), "--iters", "1", "-r", "2",
                                           "--device", "cpu", "--out", str(tmp_path / "run")])
    finally:
        scene.chmod(stat.S_IRWXU)
    assert result.exit_code == 0, result.output
    assert not (scene / ".wgsl_splat_cache").exists()
    assert len(list((tmp_path / "user_cache").rglob("*.png"))) == 3   # every view, before step 1


def test_a_bad_image_stops_training_before_step_1(tmp_path):
    from test_datasets import make_colmap

    make_colmap(tmp_path / "scene", np.random.default_rng(3), n_images=9, size=(48, 32))
    held_out = tmp_path / "scene" / "images" / "img_08.png"     # a test view with --eval
    held_out.write_bytes(held_out.read_bytes()[:70])
    result = CliRunner().invoke(main, ["train", str(tmp_path / "scene"), "--eval", "--iters", "2",
                                       "--device", "cpu", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "cannot decode image" in result.output and "img_08.png" in result.output
    assert "Training" not in result.output and not (tmp_path / "run" / "train.log").exists()


def _camera_file(path, names, size=(24, 16)):
    import json

    from wgsl_splat.camera import Camera

    cam = Camera.look_at((0.0, -3.0, 2.0), (0.0, 0.0, 0.3), (0.0, 0.0, -1.0), width=24, height=16)
    path.write_text(json.dumps([dict(world_to_camera=cam.world_to_camera.tolist(), fx=cam.fx,
                                     fy=cam.fy, cx=cam.cx, cy=cam.cy, width=size[0],
                                     height=size[1], name=name) for name in names]))
    return str(path)


def test_render_refuses_two_cameras_writing_one_file(tmp_path):
    """Two cameras of one name would write one PNG (the second replacing the first)."""
    out = tmp_path / "out"
    for names, message in ((["front", "side", "front"], "two cameras are named 'front'"),
                           (["a.png", "a.jpg"], "cameras 'a.png' and 'a.jpg' would both be "
                                                "written to a.png")):
        cams = _camera_file(tmp_path / "cams.json", names)
        result = CliRunner().invoke(main, ["render", "--camera", cams, "--out", str(out),
                                           "--device", "cpu"])
        assert result.exit_code == 1 and message in result.output, result.output
        assert "give each its own name" in result.output and "Traceback" not in result.output
        assert not out.exists()


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_render_refuses_a_huge_camera_in_one_line_on_both_paths(tmp_path, device):
    """100 000 x 100 000 pixels: the NumPy path died of a 112 GiB allocation; both paths refuse it
    with the same rule, before anything is rendered or written."""
    cams = _camera_file(tmp_path / "cams.json", ["small", "huge"], size=(100_000, 100_000))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["render", "--camera", cams, "--out", str(out),
                                       "--device", device])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert ("camera 'small': its 100000x100000 image (10000 megapixels) is beyond what "
            f"{device}" in result.output), result.output
    assert len(result.output.strip().splitlines()[-1]) < 300 and not out.exists()


def test_a_full_disk_while_rendering_is_one_line(tmp_path, monkeypatch):
    """ENOSPC while a PNG is written (as on a full tmpfs): one line naming the file."""
    import errno

    from wgsl_splat import atomic_io

    def full(path):   # no room left even for the temp file's name
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path + ".0123456789ab.tmp")

    monkeypatch.setattr(atomic_io, "_open_temp", full)
    result = CliRunner().invoke(main, ["render", "--limit", "1", "-r", "8", "--device", "cpu",
                                       "--out", str(tmp_path)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (f"the disk is full: writing {tmp_path / 'view_000.png'} failed; files written before "
            f"it are intact") in result.output, result.output


# ------------------------------------------------------------------- resuming

@pytest.mark.parametrize("strategy, flags, flag, value, other", [
    ("mcmc", [], "--cap-max", "1000000", "9000"),
    ("fast", ["--resolution-schedule", "1@0"], "--budget", "0", "9000"),
    ("fast", ["--resolution-schedule", "1@0"], "--validation-every-nth", "10", "0"),
])
def test_a_strategys_flag_on_resume_is_checked_against_the_resumed_run(tmp_path, strategy, flags,
                                                                      flag, value, other):
    """The resumed run's strategy is the checkpoint's, not the default's: a flag of its section
    given again is compared with the run's value (not refused as another strategy's option)."""
    out = str(tmp_path / "run")
    quick = ["train", "--preset", "smoke", "--iters", "4", "-r", "16", "--device", "cpu"]
    res = CliRunner().invoke(main, quick + ["--out", out, "--strategy", strategy, *flags])
    assert res.exit_code == 0, res.output
    resume = ["train", "--out", out, "--resume", "latest", "--device", "cpu"]
    res = CliRunner().invoke(main, resume + [flag, other])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert (f"Error: {flag} {other} disagrees with the run being resumed ({value}): a resumed run "
            f"keeps its own configuration") in res.output, res.output
    assert "is an option of --strategy" not in res.output
    res = CliRunner().invoke(main, resume + [flag, value])
    assert res.exit_code == 0 and "the run is complete: step 4 of 4" in res.output, res.output
    other_strategy = {"mcmc": ["--budget", "5000"], "fast": ["--cap-max", "5000"]}[strategy]
    res = CliRunner().invoke(main, resume + other_strategy)   # another strategy's flag
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert (f"{other_strategy[0]} is an option of --strategy "
            f"{'fast' if strategy == 'mcmc' else 'mcmc'}, and the run being resumed trains "
            f"{strategy}") in res.output, res.output
