"""The background shell a run from a point cloud starts with (training/startup.py): where its
points are, which are kept, what decides them, and the model and counts it gives."""

import dataclasses

import numpy as np
import pytest

from wgsl_splat.camera import Camera
from wgsl_splat.data.default_scene import default_dataset
from wgsl_splat.model import SH_C0
from wgsl_splat.training.config import TrainConfig
from wgsl_splat.training.startup import (
    background_shell,
    fibonacci_sphere,
    initial_count,
    initial_model,
)


def scene(**kw):
    return default_dataset(resolution=6, eval_split=True, num_cameras=16, num_points=600, **kw)


def seen_by(points, cameras) -> np.ndarray:
    """How many of ``cameras`` see each point (in front, inside the image), in float64."""
    count = np.zeros(len(points), int)
    for cam in cameras:
        t = points @ cam.rotation.T + cam.translation
        with np.errstate(divide="ignore", invalid="ignore"):
            u = cam.fx * t[:, 0] / t[:, 2] + cam.cx
            v = cam.fy * t[:, 1] / t[:, 2] + cam.cy
        count += (t[:, 2] > 0) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)
    return count


def sphere(dataset, cfg):
    """The shell's centre and radius, from the training cameras and the cloud."""
    centers = np.stack([dataset.cameras[i].center for i in dataset.train_indices])
    middle = centers.mean(axis=0)
    reach = max(np.linalg.norm(centers - middle, axis=1).max(),
                np.percentile(np.linalg.norm(dataset.points - middle, axis=1), 99))
    return middle, cfg.background_radius * reach


def test_the_fibonacci_lattice_is_even_over_the_sphere():
    d = fibonacci_sphere(2000)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-12)
    assert np.abs(d.mean(axis=0)).max() < 2e-3             # no side favoured
    # every direction has a neighbour about the lattice's spacing away, none much closer
    cos = d @ d.T
    np.fill_diagonal(cos, -1.0)
    nearest = np.arccos(np.clip(cos.max(axis=1), -1, 1))
    spacing = np.sqrt(4 * np.pi / 2000)
    assert 0.6 * spacing < nearest.min() and nearest.max() < 1.3 * spacing


def test_the_shell_lies_beyond_the_cameras_and_the_cloud_where_a_training_view_sees_it():
    ds, cfg = scene(), TrainConfig()
    shell = background_shell(ds, cfg)
    middle, radius = sphere(ds, cfg)
    np.testing.assert_allclose(np.linalg.norm(shell - middle, axis=1), radius, rtol=1e-9)
    train = [ds.cameras[i] for i in ds.train_indices]
    assert (seen_by(shell, train) >= 1).all()
    # exactly the lattice's directions a training view sees: the others are left out
    lattice = middle + radius * fibonacci_sphere(int(cfg.background_fraction * len(ds.points)))
    seen = lattice[seen_by(lattice, train) >= 1]
    assert 0 < len(shell) < len(lattice)
    np.testing.assert_allclose(shell, seen, rtol=0, atol=1e-9)
    # beyond every training camera and 99 % of the cloud
    centers = np.stack([c.center for c in train])
    assert np.linalg.norm(centers - middle, axis=1).max() < radius / cfg.background_radius + 1e-9


def test_held_out_cameras_do_not_decide_the_shell():
    ds, cfg = scene(), TrainConfig()
    want = background_shell(ds, cfg)
    moved = list(ds.cameras)
    for i in ds.test_indices:       # held-out views anywhere else, looking anywhere else
        cam = ds.cameras[i]
        moved[i] = Camera.look_at(cam.center * 3.0 + 1.0, -cam.center, width=cam.width,
                                  height=cam.height, name=cam.name)
    got = background_shell(dataclasses.replace(ds, cameras=moved), cfg)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", ["off", "one view", "no cloud"])
def test_no_shell(case):
    ds, cfg = scene(), TrainConfig()
    if case == "off":
        cfg.background_fraction = 0.0
    elif case == "one view":
        ds = dataclasses.replace(ds, train_indices=ds.train_indices[:1])
    else:
        ds = dataclasses.replace(ds, points=None, point_colors=None)
    assert len(background_shell(ds, cfg)) == 0


def test_the_initial_model_is_the_cloud_then_the_shell_in_grey():
    ds, cfg = scene(), TrainConfig()
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    model = initial_model(ds, cfg, rng, log=lambda line: None)
    shell = background_shell(ds, cfg)
    n = len(ds.points)
    assert model.num == n + len(shell) == initial_count(ds, cfg)
    np.testing.assert_allclose(model.means[:n], ds.points, rtol=1e-6)
    np.testing.assert_allclose(model.means[n:], shell, rtol=1e-6)
    np.testing.assert_allclose(SH_C0 * model.sh[n:, 0] + 0.5, 0.5, atol=1e-7)
    assert rng.bit_generator.state == before      # the view order of the run is the cloud's
    # the shell's scales follow its own spacing (the k-NN initialisation), not the cloud's
    shell_scale = np.exp(model.log_scales[n:, 0]).astype(np.float64)
    _, radius = sphere(ds, cfg)
    spacing = radius * np.sqrt(4 * np.pi / (cfg.background_fraction * n))
    assert 0.3 * spacing < np.median(shell_scale) < 2.0 * spacing


def test_a_run_configured_before_the_shell_resumes_without_it():
    d = TrainConfig().to_dict()
    assert d["background_fraction"] == 0.5
    del d["background_fraction"]
    assert TrainConfig.from_dict(d).background_fraction == 0.0


def test_a_camera_sees_what_lies_in_front_of_it_inside_its_image():
    cam = Camera.look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], width=40, height=30)
    rng = np.random.default_rng(3)
    pts = rng.uniform(-8, 8, (4000, 3))
    pts[:5] = [[0, 0, -4], [0, 0, -5], [0, 0, 0], [0, 0, -3.9], [0, 0, -3.95]]   # at/behind/ahead
    np.testing.assert_array_equal(cam.sees(pts), seen_by(pts, [cam]) == 1)
    assert cam.sees(pts[:5]).tolist() == [False, False, True, True, True]
    assert cam.sees(pts[:5], near=0.08).tolist() == [False, False, True, True, False]
