"""The exact grid k-NN used to initialise scales from a point cloud equals brute force."""

import numpy as np
import pytest

from wgsl_splat.model import GaussianModel, knn_mean_sq_dist


def exact_knn(pts, k):
    """Direct pairwise differences (no |p|²+|q|²-2p·q cancellation), small clouds only."""
    d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    return np.sort(d2, axis=1)[:, :k].mean(axis=1)


def clouds(rng):
    yield "uniform", rng.uniform(-1, 1, (3000, 3))
    yield "surface with outliers", np.concatenate([
        np.c_[rng.uniform(-1, 1, (2500, 2)), 0.01 * rng.normal(size=2500)], rng.normal(0, 20, (50, 3))])
    yield "tight clusters", np.concatenate([c + 1e-3 * rng.normal(size=(600, 3))
                                            for c in rng.uniform(-5, 5, (5, 3))])
    yield "duplicated points", np.repeat(rng.uniform(-1, 1, (700, 3)), 3, axis=0)
    yield "a line", np.c_[np.linspace(0, 1, 2000), np.zeros(2000), np.zeros(2000)]


@pytest.mark.parametrize("k", [1, 3])
def test_grid_knn_equals_brute_force(k):
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    for name, pts in clouds(rng):
        grid = knn_mean_sq_dist(pts, k=k, brute_force_below=0)       # force the grid path
        np.testing.assert_allclose(grid, exact_knn(pts, k), rtol=1e-9, atol=1e-15, err_msg=name)


def test_tiny_clouds_and_from_points():
    assert knn_mean_sq_dist(np.zeros((1, 3))).shape == (1,)
    np.testing.assert_allclose(knn_mean_sq_dist(np.array([[0.0, 0, 0], [3.0, 0, 0]])), [9.0, 9.0])
    model = GaussianModel.from_points(np.random.default_rng(0).uniform(size=(50, 3)),
                                      np.full((50, 3), 0.5))
    assert np.all(np.isfinite(model.log_scales))
