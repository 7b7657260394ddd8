"""benchmarks/colour_fit.py on a short run of the embedded scene (NumPy path): from the renders a
run saved it scores what the run scored, and what ``eval --colour-fit`` scores."""

from __future__ import annotations

import json

import pytest
from benchmark_scripts import load_benchmark, short_run
from click.testing import CliRunner

from wgsl_splat.app.cli import main


def load_probe():
    return load_benchmark("colour_fit")


def test_colour_fit_probe_rescores_the_saved_renders(tmp_path):
    out = tmp_path / "run"
    short_run(out, "--eval-at", "10,20")
    res = CliRunner().invoke(main, ["eval", str(out), "--device", "cpu", "--colour-fit"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    curve = load_probe().rescore(str(out))["curve"]
    assert sorted(curve) == [10, 20]
    for step in (10, 20):
        assert curve[step]["psnr"] == pytest.approx(metrics[f"iteration_{step}"]["mean"]["psnr"],
                                                    abs=1e-9)
    again = metrics["eval_iteration_20"]["mean"]
    assert curve[20]["fit_psnr"] == pytest.approx(again["fit_psnr"], abs=1e-9)
    assert curve[20]["fit_ssim"] == pytest.approx(again["fit_ssim"], abs=1e-9)
    assert curve[20]["right_psnr"] != curve[20]["psnr"]
