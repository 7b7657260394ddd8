"""The examples run (small sizes) and do what they say."""

import runpy
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [name] + argv)
    return runpy.run_path(str(EXAMPLES / name), run_name="not_main")["main"](argv)


def test_step_api_example_fits_on_the_gpu(tmp_path, monkeypatch, gpu_ctx):
    ratio = run_example("step_api.py", ["--steps", "60", "--size", "48", "--device", "gpu",
                                        "--out", str(tmp_path / "fit.ply")], monkeypatch)
    assert ratio < 0.8 and (tmp_path / "fit.ply").stat().st_size > 1000


def test_render_orbit_example(tmp_path, monkeypatch, gpu_ctx):
    from wgsl_splat.data.ply import save_ply
    from wgsl_splat.tools.random_scene import random_scene

    model, _ = random_scene(np.random.default_rng(0), 200, 32, 32, sh_degree=1, edge_cases=False,
                            dtype=np.float32)
    save_ply(tmp_path / "m.ply", model)
    paths = run_example("render_orbit.py", [str(tmp_path / "m.ply"), "--frames", "3", "--size",
                                            "40x30", "--out", str(tmp_path / "orbit")], monkeypatch)
    frames = [iio.imread(p) for p in paths]
    assert len(frames) == 3 and frames[0].shape == (30, 40, 3)
    assert not np.array_equal(frames[0], frames[1]), "the camera did not move"
