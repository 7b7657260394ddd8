"""Held-out evaluation as the 3DGS protocol computes it: 8-bit quantised images, per-view metrics,
the saved renders are the scored images, and LPIPS optional (a note, never a failure)."""

from __future__ import annotations

import json
import sys
import types

import imageio.v3 as iio
import numpy as np
import pytest

from wgsl_splat.data.default_scene import default_dataset
from wgsl_splat.reference.loss import psnr, ssim
from wgsl_splat.training.evaluation import (
    FIT_METRICS,
    Lpips,
    colour_fitted_metrics,
    evaluate_views,
    fit_colour_map,
    image_metrics,
    quantised,
)


@pytest.fixture
def rng(request):
    seed = int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.name}: seed={seed}")
    return np.random.default_rng(seed)


def test_metrics_are_taken_on_the_8_bit_images(rng):
    gt = rng.uniform(0, 1, (24, 20, 3))
    render = np.clip(gt + rng.normal(0, 0.05, gt.shape), -0.2, 1.2)   # out of range too
    m = image_metrics(render, gt)
    r8 = np.floor(np.clip(render, 0, 1) * 255 + 0.5) / 255
    g8 = np.floor(gt * 255 + 0.5) / 255
    assert m["psnr"] == pytest.approx(10 * np.log10(1 / np.mean((r8 - g8) ** 2)), rel=1e-12)
    assert m["ssim"] == pytest.approx(ssim(r8, g8), rel=1e-12)
    assert m["l1"] == pytest.approx(np.mean(np.abs(r8 - g8)), rel=1e-12)
    # quantisation is not a no-op: the float metric differs
    assert m["psnr"] != pytest.approx(psnr(np.clip(render, 0, 1), gt), abs=1e-6)
    assert np.array_equal(quantised(np.array([0.0, 0.5 / 255, 1.5 / 255, 1.0, 2.0])) * 255,
                          [0, 1, 2, 255, 255])


def test_evaluate_views_saves_the_scored_renders_and_per_view_metrics(tmp_path, rng):
    ds = default_dataset(resolution=8, eval_split=True, num_cameras=16, num_points=50)
    noise = {}

    def render(cam):   # a deterministic "render" per view: the ground truth plus noise
        i = next(k for k, c in enumerate(ds.cameras) if c is cam)
        noise[i] = np.clip(ds.load_image(i) + rng.normal(0, 0.1, ds.load_image(i).shape), 0, 1)
        return noise[i]

    result = evaluate_views(ds, render, str(tmp_path), 7)
    assert result["split"] == "test" and result["views"] == 2 == len(result["per_view"])
    assert "LPIPS" in result["lpips_note"] and "lpips" not in result["mean"]
    for i in ds.test_indices:
        name = ds.cameras[i].name
        saved = iio.imread(tmp_path / "test" / "iteration_7" / (name.rsplit(".", 1)[0] + ".png"))
        # the PNG on disk scores exactly what the metrics say (as 3DGS's metrics.py reads PNGs)
        assert result["per_view"][name]["psnr"] == pytest.approx(
            psnr(saved / 255.0, quantised(ds.load_image(i))), rel=1e-12)
    mean = np.mean([v["psnr"] for v in result["per_view"].values()])
    assert result["mean"]["psnr"] == pytest.approx(mean)
    json.dumps(result)   # goes into metrics.json as is


def test_views_scored_on_worker_threads_keep_their_order_names_and_images(tmp_path, rng,
                                                                         monkeypatch):
    """Renders on this thread, metrics and PNGs on 3 workers with up to 6 views in flight: each
    view's PNG and metrics are its own render's, in view order, as scored one at a time."""
    import wgsl_splat.training.evaluation as evaluation

    ds = default_dataset(resolution=8, eval_split=True, num_cameras=60, num_points=50)
    assert len(ds.test_indices) > 6
    renders = {}

    def render(cam):
        i = next(k for k, c in enumerate(ds.cameras) if c is cam)
        renders[cam.name] = rng.random(ds.load_image(i).shape)
        return renders[cam.name]

    monkeypatch.setattr(evaluation, "eval_workers", lambda: 3)
    result = evaluate_views(ds, render, str(tmp_path), 2)
    names = [ds.cameras[i].name for i in ds.test_indices]
    assert list(result["per_view"]) == names
    for i, name in zip(ds.test_indices, names):
        saved = iio.imread(tmp_path / "test" / "iteration_2" / (name.rsplit(".", 1)[0] + ".png"))
        assert np.array_equal(saved / 255.0, quantised(renders[name]))
        assert result["per_view"][name] == image_metrics(renders[name], ds.load_image(i))


def test_lpips_missing_is_a_note_and_present_is_scored(tmp_path, monkeypatch):
    ds = default_dataset(resolution=8, eval_split=True, num_cameras=8, num_points=50)
    monkeypatch.setitem(sys.modules, "lpips", None)      # import lpips -> ImportError
    result = evaluate_views(ds, lambda cam: np.zeros((cam.height, cam.width, 3)), str(tmp_path), 1,
                            lpips=Lpips())
    assert "lpips" not in result["mean"] and "wgsl_splat[lpips]" in result["lpips_note"]
    assert "\n" not in result["lpips_note"]

    # A stand-in for the package (torch and the VGG weights are not installed here): check that
    # the scorer gets both 8-bit images as (1, 3, H, W) tensors in [0, 1], VGG, and is averaged.
    calls = []

    class FakeTensor:
        def __init__(self, a):
            self.a = a

        def item(self):
            return self.a

    class FakeLPIPS:
        def __init__(self, net, verbose):
            assert net == "vgg"

        def eval(self):
            return self

        def __call__(self, x, y):
            calls.append((x.a, y.a))
            return FakeTensor(float(np.abs(x.a - y.a).mean()))

    class NoGrad:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setitem(sys.modules, "lpips", types.SimpleNamespace(LPIPS=FakeLPIPS))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        from_numpy=FakeTensor, no_grad=NoGrad))
    result = evaluate_views(ds, lambda cam: np.full((cam.height, cam.width, 3), 0.25),
                            str(tmp_path), 2, lpips=Lpips())
    assert result["lpips_note"] is None and len(calls) == result["views"] == 1
    x, y = calls[0]
    assert x.shape == (1, 3) + y.shape[2:] and x.dtype == np.float32 and np.all(x == 64 / 255)
    name = ds.cameras[ds.test_indices[0]].name
    assert result["mean"]["lpips"] == pytest.approx(result["per_view"][name]["lpips"])
    assert "LPIPS" in result["line"]


def test_views_whose_mask_leaves_no_pixel_are_skipped_never_raised(tmp_path, rng):
    """``eval`` does not preload, so evaluate_views itself skips a view whose mask keeps nothing
    (image_metrics would raise); with every held-out view skipped it scores training views, as a
    preloaded split would; with nothing left the result says so."""
    ds = default_dataset(resolution=8, eval_split=True, num_cameras=24, num_points=50)
    empty = set()

    def load_mask(i):
        h, w = ds.cameras[i].height, ds.cameras[i].width
        return np.zeros((h, w), bool) if i in empty else None

    ds.load_mask = load_mask
    render = lambda cam: np.full((cam.height, cam.width, 3), 0.5)   # noqa: E731
    for count in (int(rng.integers(1, len(ds.test_indices))), len(ds.test_indices)):
        empty = set(rng.choice(ds.test_indices, count, replace=False).tolist())
        out = tmp_path / str(count)
        result = evaluate_views(ds, render, str(out), 3)
        names = [ds.cameras[i].name for i in sorted(empty)]
        assert result["skipped"] == names and not set(names) & set(result["per_view"])
        assert (f"{count} skipped: the mask of {', '.join(names)} leaves no pixel"
                in result["line"])
        if count < len(ds.test_indices):
            assert result["split"] == "test" and result["views"] == len(ds.test_indices) - count
        else:
            assert result["split"] == "train" and result["views"] > 0
            assert not (out / "test").exists()
        json.dumps(result)
    empty = set(range(len(ds.cameras)))          # nothing at all can be scored
    result = evaluate_views(ds, render, str(tmp_path / "none"), 4)
    assert result["views"] == 0 and result["mean"] == {} and result["per_view"] == {}
    assert result["line"].startswith("eval @ 4: no view could be scored: the mask of ")
    json.dumps(result)


def random_colour_map(rng):
    """An exposure-and-tint-like [A | b]: a scaled near-identity matrix and a small offset (takes
    [0.2, 0.7] into [0, 1]: nothing clips)."""
    a = np.diag(rng.uniform(0.7, 1.2, 3)) + np.clip(rng.normal(0, 0.02, (3, 3)), -0.04, 0.04)
    return np.hstack([a, rng.uniform(-0.05, 0.05, (3, 1))])


def test_fit_colour_map_recovers_an_affine_map_and_ignores_outliers(rng):
    render = rng.uniform(0.2, 0.7, (60, 80, 3))
    m = random_colour_map(rng)
    gt = render @ m[:, :3].T + m[:, 3]
    np.testing.assert_allclose(fit_colour_map(render, gt), m, atol=1e-6)
    keep = rng.uniform(size=(60, 80)) < 0.5
    gt_broken = np.where(keep[..., None], gt, rng.uniform(0, 1, gt.shape))
    np.testing.assert_allclose(fit_colour_map(render, gt_broken, keep), m, atol=1e-6)
    flat = np.full((8, 8, 3), 0.4)                      # one colour: the pull to the identity
    assert np.all(np.isfinite(fit_colour_map(flat, flat * 0.5 + 0.1)))

    # L1, not least squares: a fifth of the pixels wrong (a region the model never made) barely
    # moves it, where the least-squares map bends; and no nearby map has a smaller L1 error
    outliers = rng.uniform(size=(60, 80)) < 0.2
    gt_out = np.where(outliers[..., None], rng.uniform(0, 1, gt.shape), gt)
    x = np.c_[render.reshape(-1, 3), np.ones(4800)]
    squares, *_ = np.linalg.lstsq(x, gt_out.reshape(-1, 3), rcond=None)
    fitted = fit_colour_map(render, gt_out)
    assert np.abs(fitted - m).max() < 0.02 < np.abs(squares.T - m).max()

    def l1(w):
        return np.abs(x @ w.T - gt_out.reshape(-1, 3)).sum()

    for _ in range(20):
        assert l1(fitted) <= l1(fitted + rng.normal(0, 1e-3, (3, 4))) + 1e-9
    assert l1(fitted) < l1(squares.T)


def test_colour_fitted_metrics_fit_the_left_half_and_score_the_right(rng):
    h, w = 32, 48
    render = rng.uniform(0.2, 0.7, (h, w, 3))
    m = random_colour_map(rng)
    photo = render @ m[:, :3].T + m[:, 3]                    # the render under another exposure
    plain, fitted = image_metrics(render, photo), colour_fitted_metrics(render, photo)
    assert set(fitted) == set(FIT_METRICS)
    assert fitted["fit_psnr"] > plain["psnr"] + 10 and fitted["fit_psnr"] > 40

    # by hand: the map of the left half of the 8-bit images, applied to and scored on the right
    a8, b8 = quantised(render), quantised(photo)
    sol = fit_colour_map(a8[:, : w // 2], b8[:, : w // 2])
    right = a8[:, w // 2:] @ sol[:, :3].T + sol[:, 3]
    expect = image_metrics(right, photo[:, w // 2:])
    for k, v in expect.items():
        assert fitted[f"fit_{k}"] == pytest.approx(v, abs=1e-6)

    # the scored half is never fitted: expose the photo's right half differently and the score
    # falls; change its left half under a mask and the score does not move
    other = photo.copy()
    other[:, w // 2:] = np.clip(other[:, w // 2:] * 0.7, 0, 1)
    assert colour_fitted_metrics(render, other)["fit_psnr"] < fitted["fit_psnr"] - 10
    mask = np.ones((h, w), bool)
    mask[: h // 2, : w // 4] = False
    junk = photo.copy()
    junk[~mask] = rng.uniform(0, 1, (int((~mask).sum()), 3))
    masked = colour_fitted_metrics(render, junk, mask)
    assert masked["fit_psnr"] > 40
    assert masked == colour_fitted_metrics(render, photo, mask)


def test_evaluate_views_reports_the_colour_fit_only_when_asked(tmp_path, rng):
    ds = default_dataset(resolution=8, eval_split=True, num_cameras=16, num_points=50)
    m = random_colour_map(rng)

    def render(cam):                      # every held-out photo through one exposure change
        i = next(k for k, c in enumerate(ds.cameras) if c is cam)
        return np.clip(ds.load_image(i) @ m[:, :3].T + m[:, 3], 0, 1)

    plain = evaluate_views(ds, render, str(tmp_path / "a"), 1)
    fit = evaluate_views(ds, render, str(tmp_path / "b"), 1, colour_fit=True)
    assert not set(FIT_METRICS) & set(plain["mean"])
    assert all(set(FIT_METRICS) <= set(v) for v in fit["per_view"].values())
    for k in ("psnr", "ssim", "l1"):
        assert fit["mean"][k] == plain["mean"][k]
    assert fit["mean"]["fit_psnr"] > plain["mean"]["psnr"] + 5
    assert "colour fitted" in fit["line"] and "fit_*" in fit["protocol"]
