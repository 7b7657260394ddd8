"""benchmarks/veil.py on a short run of the embedded scene (NumPy path): a dark, opaque Gaussian
planted just in front of a held-out camera is named as that view's veil, and removing what it
names gives back the run's own model, view for view."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_scripts import load_benchmark, short_run

from wgsl_splat.app.common import load_cameras_json
from wgsl_splat.data.ply import load_ply, save_ply
from wgsl_splat.model import GaussianModel, rgb_to_sh_dc


def test_veil_probe_names_a_planted_veil_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    # without the background shell: after 20 steps its grey fog still covers the black
    # background, and a dark veil would spoil the held-out views less than the test needs
    short_run(out, "--eval-at", "20", "--background-fraction", "0")
    probe = load_benchmark("veil")
    before = probe.veils(str(out), 20, device="cpu", candidates=8)
    assert before["views"], "the embedded scene holds views out"

    cams, train = load_cameras_json(out / "cameras.json")
    held = [c for i, c in enumerate(cams) if i not in set(train)]
    cam = next(c for c in held if c.name == before["views"][0]["name"])
    ply = out / "point_cloud" / "iteration_20" / "point_cloud.ply"
    model = load_ply(ply)
    # 1.5 in front of the camera, 0.4 across (the camera 3.75 σ away, outside the body a renderer
    # may cull): it covers most of the view, dark and opaque
    sh = np.zeros((1,) + model.sh.shape[1:])
    sh[0, 0] = rgb_to_sh_dc(np.array([0.02, 0.02, 0.02]))
    veil = GaussianModel(cam.center[None] + 1.5 * cam.rotation[2][None],
                         np.full((1, 3), np.log(0.4)), np.array([[1.0, 0.0, 0.0, 0.0]]),
                         np.array([6.0]), sh).astype(model.dtype)
    save_ply(ply, GaussianModel.concatenate([model, veil]))

    after = probe.veils(str(out), 20, view=cam.name, device="cpu", candidates=8)
    (view,) = after["views"]
    assert view["psnr"] < before["views"][0]["psnr"] - 3.0
    assert [d["index"] for d in view["veils"]] == [model.num]      # the planted row, alone
    found = view["veils"][0]
    assert found["gain"] > 3.0 and found["opacity"] > 0.99
    assert found["depth"] == pytest.approx(1.5, rel=1e-4)
    assert view["unveiled_psnr"] == pytest.approx(before["views"][0]["psnr"], abs=1e-9)
