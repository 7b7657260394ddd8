"""The command line as a user runs it."""

import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from wgsl_splat.cli import main


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
    assert img.shape == gt.shape == (128, 128, 3)
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


def test_gradcheck_command_passes_and_fails_loudly():
    from click.testing import CliRunner

    from wgsl_splat.cli import main

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


def test_bench_command_reports_both_paths_and_writes_json(tmp_path):
    import json

    from click.testing import CliRunner

    from wgsl_splat.cli import main

    out = tmp_path / "bench.json"
    res = CliRunner().invoke(main, ["bench", "-n", "300", "--width", "64", "--height", "48",
                                    "--steps", "2", "--warmup", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    r = report["results"][0]
    assert (r["n"], r["width"], r["height"]) == (300, 64, 48)
    gpu, cpu = r["gpu"], r["cpu"]
    assert gpu["step"]["runs"] == 2 and gpu["step"]["median_ms"] > 0 and gpu["host"]["median_ms"] > 0
    assert set(gpu["stages"]) >= {"project", "rasterize", "loss", "raster backward", "adam"}
    assert gpu["peak_bytes"] > 0 and gpu["bytes_per_gaussian"] == gpu["peak_bytes"] / 300
    assert set(cpu["stages"]) == {"forward", "loss", "backward", "adam"}
    assert report["machine"]["adapter"] and report["machine"]["backend"]
    assert "faster than the NumPy step" in res.output and "Amdahl" in res.output
    res = CliRunner().invoke(main, ["bench", "--preset", "nope"])
    assert res.exit_code == 1 and "unknown preset" in res.output
