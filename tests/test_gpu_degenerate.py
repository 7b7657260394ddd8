"""Degenerate Gaussians are culled on both paths, in both layouts, never rasterised (issue 33
item 2). A GPU compiled with fast math (Metal's default) may answer a float compare with NaN or
Inf either way, so the device tests the parameter bits (gaussian.wgsl's gaussian_valid) and
clamps the tile rectangle only from finite values: a garbage rectangle would loop emission ~2^32
times. lavapipe compares as IEEE says, so what these tests show here is that both paths apply the
same rule (reference/projection.py's valid_rows) and that nothing else of the image changes."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_emission import LAYOUTS

from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.renderer import GpuRenderer
from wgsl_splat.model import GaussianModel
from wgsl_splat.reference import render
from wgsl_splat.reference.projection import valid_rows
from wgsl_splat.tools.random_scene import random_scene


def degenerate_copies(model: GaussianModel, rng) -> GaussianModel:
    """Copies of visible-looking rows, each broken one way: zero quaternion, NaN mean, ±Inf
    log-scale, NaN opacity logit, NaN quaternion, Inf mean, NaN log-scale."""
    picks = rng.choice(len(model), 8, replace=False)
    bad = model.subset(picks)
    bad.quats[0] = 0.0
    bad.means[1, rng.integers(3)] = np.nan
    bad.log_scales[2, rng.integers(3)] = np.inf
    bad.log_scales[3, :] = -np.inf
    bad.opacity_logits[4] = np.nan
    bad.quats[5, rng.integers(4)] = np.nan
    bad.means[6, rng.integers(3)] = -np.inf
    bad.log_scales[7, rng.integers(3)] = np.nan
    return bad


@pytest.mark.parametrize("layout", LAYOUTS)
def test_degenerate_gaussians_are_culled_and_change_no_pixel(gpu_ctx, layout):
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    rng = np.random.default_rng(seed)
    clean, cam = random_scene(rng, 300, 70, 50, dtype=np.float32)
    clean.opacity_logits[:] = np.maximum(clean.opacity_logits, 0.0)   # every copy would draw
    bad = degenerate_copies(clean, rng)
    model = GaussianModel.concatenate([clean, bad]).astype(np.float32)
    broken = np.arange(len(clean), len(model))
    assert not valid_rows(model)[broken].any() and valid_rows(model)[:len(clean)].all()

    r = GpuRenderer(gpu_ctx, layout=Layout.of(gpu_ctx, layout))
    r.upload_model(clean)
    want = r.render(cam, (0.1, 0.2, 0.3))
    r.upload_model(model)
    got = r.render(cam, (0.1, 0.2, 0.3))
    gp = r.read_projection()
    assert np.all(gp["radii"][broken] == 0), f"seed {seed}: {gp['radii'][broken]}"
    assert np.all(gp["tile_rect"][broken] == 0), f"seed {seed}: {gp['tile_rect'][broken]}"
    assert np.isfinite(got).all() and np.array_equal(got, want), f"seed {seed}"

    with np.errstate(all="ignore"):
        ref = render(model.astype(np.float64), cam, background=(0.1, 0.2, 0.3))
    assert np.all(ref.proj.radii[broken] == 0) and np.all(ref.proj.tile_rect[broken] == 0), seed
    clean_ref = render(clean.astype(np.float64), cam, background=(0.1, 0.2, 0.3))
    assert np.array_equal(ref.image, clean_ref.image), f"seed {seed}"
