"""The state beyond one storage binding (gpu/pages.py): on a device that asks for 64 KiB bindings
(``WGSL_SPLAT_MAX_BINDING``, enforced by wgpu's validation) the same model spans several pages and
two splat buffers, and every result equals the one-binding device's — renders and row operations
bit for bit, gradients and a training step up to the atomics' reordering."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SMALL_BINDING
from test_gpu_state import assert_arrays_close
from test_gpu_step import fresh_seed
from test_strategy import random_arrays

from wgsl_splat.camera import Camera
from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.pages import Paging
from wgsl_splat.gpu.renderer import GpuRenderer
from wgsl_splat.gpu.runtime import GpuOutOfMemoryError
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.model import GaussianModel
from wgsl_splat.render_config import render_config
from wgsl_splat.strategy.adc import ADCRound, adc_round
from wgsl_splat.tools.gradcheck import rel_error
from wgsl_splat.tools.random_scene import filter_cameras, random_scene

SMALL = SMALL_BINDING           # bytes per binding: 256 Gaussians of SH degree 3 per page
N = 1500                        # 6 pages; splats beyond 1280 in the second splat buffer
W, H = 40, 30                   # the image-sized buffers fit a 64 KiB binding too




def scene(seed, sh_degree=3):
    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, N, W, H, sh_degree=sh_degree, dtype=np.float32)
    target = rng.uniform(0, 1, (H, W, 3)).astype(np.float32)
    return model, cam, target


def test_the_small_device_spans_pages_and_both_splat_buffers(small_ctx):
    paging = Paging(small_ctx.max_binding_bytes, 16)
    assert paging.rows == 256 and paging.split == 1280 and paging.count(N) == 6
    model, _, _ = scene(fresh_seed())
    r = GpuRenderer(small_ctx)
    r.upload_model(model)
    assert len(r.pages) == 6 and "params@5" in r.pool and "splats_hi" in r.pool
    with pytest.raises(GpuOutOfMemoryError):      # a whole-bound buffer beyond one binding
        r.pool.get("too_big", SMALL + 256)


@pytest.mark.parametrize("mode", ["classic", "antialiased"])
def test_render_is_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx, mode):
    model, cam, _ = scene(fresh_seed())
    images = []
    for ctx in (gpu_ctx, small_ctx):
        r = GpuRenderer(ctx, config=render_config(mode))
        r.upload_model(model, filter_3d=np.linspace(0.0, 0.01, N).astype(np.float32))
        images.append((r.render(cam, (0.2, 0.3, 0.4)), r.read_projection()))
    (a, pa), (b, pb) = images
    np.testing.assert_array_equal(a, b)
    for key in pa:
        np.testing.assert_array_equal(pa[key], pb[key], err_msg=key)


def test_gradients_and_a_step_are_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx):
    seed = fresh_seed()
    model, cam, target = scene(seed)
    one = GpuTrainStep(gpu_ctx, model, OptimConfig())
    many = GpuTrainStep(small_ctx, model, OptimConfig())
    assert len(many.renderer.pages) == 6 and len(one.renderer.pages) == 1
    ga, gb = one.gradients(cam, target), many.gradients(cam, target)
    assert ga.loss == gb.loss
    np.testing.assert_array_equal(ga.image, gb.image)
    # the splats' partial sums meet in float atomics in whatever order: ~1e-7 relative
    assert rel_error(gb.screen, ga.screen)[0] <= 1e-5, f"seed {seed}"
    for name, g in ga.params.arrays().items():
        assert rel_error(gb.params.arrays()[name], g)[0] <= 1e-5, f"seed {seed}: {name}"
    for step in (one, many):          # the fused step (Adam inside the projection backward pass)
        step.step(cam, target, view_id=0)
        step.step(cam, target, view_id=0)
    la, lb = one.take_losses(), many.take_losses()
    assert la[0] == lb[0] and abs(la[1] - lb[1]) <= 1e-5 * la[1]
    a, b = one.state.download(), many.state.download()
    for name, arr in a.model.arrays().items():
        close = np.isclose(b.model.arrays()[name], arr, rtol=1e-5, atol=1e-6)
        assert close.mean() > 0.99, f"seed {seed}: {name} differs in {np.sum(~close)} entries"
    np.testing.assert_array_equal(a.stats["denom"], b.stats["denom"])


#: the buffers a gradient computation writes: parameter gradients (every page), the splats (both
#: halves), the copy of their screen-space gradients, the image and its gradient. Not ``grad2d``
#: itself: an accumulator that the projection backward pass leaves zero for the next step (checked)
OUTPUTS = ("grads", "grad2d_copy", "splats", "splats_hi", "image", "grad_image")


def poison(pool, prefixes=OUTPUTS):
    """Fill every buffer named ``prefix`` or ``prefix@page`` with 0xFF bytes (NaN as float32): a
    page or half a kernel leaves unwritten shows as NaN instead of as an earlier result."""
    hit = [name for name in pool.names() if name.split("@")[0] in prefixes]
    for name in hit:
        pool.write(name, np.full(pool.size(name), 0xFF, np.uint8))
    return hit


def test_gradients_over_poisoned_outputs_are_the_same_on_one_and_on_many_bindings(
        gpu_ctx, small_ctx):
    """Fresh random inputs each run; both devices compute once on other data (the buffers exist),
    then every output buffer is poisoned before the gradients that are compared."""
    seed = fresh_seed()
    model, cam, target = scene(seed)
    other, other_cam, other_target = scene(seed + 1)
    results = []
    for ctx in (gpu_ctx, small_ctx):
        step = GpuTrainStep(ctx, other, OptimConfig())
        step.gradients(other_cam, other_target)
        step.state.upload(HostArrays.fresh(model, step.state.stat_names))
        hit = poison(step.pool)
        assert {"grads", "grad2d_copy", "splats", "image"} <= set(hit)
        if ctx is small_ctx:          # the pages beyond the first and the upper splat buffer
            assert {"grads@5", "splats_hi"} <= set(hit), hit
        results.append(step.gradients(cam, target))
        for name in ("grad2d", "grad2d_hi"):
            if name in step.pool:
                left = step.pool.read_array(name, np.float32, step.pool.size(name) // 4)
                assert not np.any(left), f"{name} not left zero"
    ga, gb = results
    for g in (ga, gb):
        assert np.all(np.isfinite(g.image)) and np.all(np.isfinite(g.screen)), f"seed {seed}"
        for name, arr in g.params.arrays().items():
            assert np.all(np.isfinite(arr)), f"seed {seed}: {name} holds poison"
    assert ga.loss == gb.loss
    np.testing.assert_array_equal(ga.image, gb.image)
    assert rel_error(gb.screen, ga.screen)[0] <= 1e-5, f"seed {seed}"
    for name, g in ga.params.arrays().items():
        assert rel_error(gb.params.arrays()[name], g)[0] <= 1e-5, f"seed {seed}: {name}"


def test_row_operations_are_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx):
    """ADC's grow (clones, splits, prunes across pages), MCMC's relocation and growth, the opacity
    reset: from the same uploaded state, the same state bit for bit."""
    rng = np.random.default_rng(fresh_seed())
    arrays = random_arrays(rng, N, sh_degree=3)
    results = []
    for ctx in (gpu_ctx, small_ctx):
        step = GpuTrainStep(ctx, arrays, OptimConfig())
        state = step.state
        adc_round(state, ADCRound(2e-4, 0.02, 2, 1.6, 0.0, 1e9, 1e9, 10**6, key=3))
        assert state.n > N                        # grown, further past the split
        adc_round(state, ADCRound(1e-12, 0.02, 2, 1.6, 0.005, 0.15, 20.0, 400, key=7))
        state.relocate(0.005, key=4)
        state.sample_add(300, 0.005, key=5)
        state.perturb_means(1e-3, key=6)
        state.reset_opacity(0.01)
        results.append(state.download())
    assert_arrays_close(results[1], results[0], rtol=0, atol=0,
                        exact=("means", "log_scales", "quats", "opacity_logits", "sh"))


def test_a_round_ranked_on_the_device_is_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx):
    """The fast mode's capped round: the rank keys written per page (each page's statistics),
    ranked over all rows (rank.wgsl) — the same rows grow as on one binding and on the host."""
    from test_fast_strategy import fast_arrays, round_

    from wgsl_splat.reference.state import HostState
    from wgsl_splat.strategy.fast import FastDecision

    rng = np.random.default_rng(fresh_seed())
    arrays = fast_arrays(rng, N)
    arrays.stats["fast_err"][:] = rng.choice(np.float32([0.0, 1.0, 2.0, 3.0]), N)   # ties
    clone_max = float(np.median(np.exp(arrays.model.log_scales).max(1)))
    decision = FastDecision(round_(clone_max_scale=clone_max, min_opacity=0.05))
    host = HostState(arrays)
    want = host.grow(decision, 150)
    assert want.capped and want.cloned + want.split > 0
    results = []
    for ctx in (gpu_ctx, small_ctx):
        step = GpuTrainStep(ctx, arrays, OptimConfig())
        assert step.state.grow(decision, 150) == want
        results.append(step.state.download())
    assert len(step.state.pages) > 1
    assert_arrays_close(results[1], results[0], rtol=0, atol=0,
                        exact=("means", "log_scales", "quats", "opacity_logits", "sh"))
    assert_arrays_close(results[0], host.download(), atol=1e-6, exact=("quats", "sh"))


def test_the_3d_filter_is_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx):
    model, cam, _ = scene(fresh_seed())
    out = []
    for ctx in (gpu_ctx, small_ctx):
        step = GpuTrainStep(ctx, HostArrays.fresh(model), OptimConfig(),
                            render_config=render_config("antialiased"))
        step.set_filter_cameras(filter_cameras(cam))
        step.update_filter_3d()
        out.append(step.filter_3d())
    np.testing.assert_array_equal(out[0], out[1])
    assert np.any(out[0] > 0)


def test_a_view_observation_is_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx):
    """The fast strategy's observation (observe.wgsl, once per page) adds the same α·T sums to the
    statistics of every page and leaves grad2d zero in both splat buffers."""
    from wgsl_splat.contract.error_maps import ErrorMaps
    from wgsl_splat.contract.step import View
    from wgsl_splat.strategy.fast import OBSERVED_STATS, Fast

    seed = fresh_seed()
    model, cam, target = scene(seed)
    # random_scene's edge cases (huge, stacked, nearly opaque splats, which hide most others) are
    # its first rows, and some draws left nothing visible beyond row 1280: rolled so that they sit
    # in the second splat buffer, beyond the split.
    model = model.subset(np.roll(np.arange(N), 1280))
    arrays = HostArrays.fresh(model, Fast.statistics)
    rng = np.random.default_rng(seed)
    for name in OBSERVED_STATS:
        arrays.stats[name][:] = rng.uniform(0, 10, N)
    out = []
    for ctx in (gpu_ctx, small_ctx):
        step = GpuTrainStep(ctx, arrays, OptimConfig())
        step.observe([View(cam, target)], ErrorMaps(0.2), OBSERVED_STATS, 2)
        out.append(step.state.read_stats())
        for name in ("grad2d", "grad2d_hi"):
            if name in step.pool:
                assert not step.pool.read_array(name, np.float32, step.pool.size(name) // 4).any()
    assert len(GpuTrainStep(small_ctx, arrays, OptimConfig()).renderer.pages) == 6
    for name in OBSERVED_STATS:
        a, b = out
        assert np.any(b[name][1280:] > arrays.stats[name][1280:] + 1e-3), name   # beyond the split
        assert np.linalg.norm(b[name] - a[name]) <= 1e-5 * np.linalg.norm(a[name]), f"seed {seed}"


def faint_covering_scene(rng, n: int = 2000):
    """``n`` faint splats each covering all 3 x 3 tiles of a 33 x 33 image (its loss buffers fit
    64 KiB too): 9 n pairs, past the 16 384 a 64 KiB binding holds at n = 2000."""
    model = GaussianModel.random(n, rng, extent=0.3, scale_range=(0.05, 0.1), sh_degree=0,
                                 dtype=np.float32)
    model.log_scales[:] = np.log(rng.uniform(1.5, 2.5, (n, 3)))
    model.opacity_logits[:] = rng.uniform(-4.5, -4.0, n)     # above the 1/255 alpha floor
    cam = Camera.look_at((0.2, 0.1, -3.0), (0, 0, 0), width=33, height=33, fov_x_deg=60)
    return model, cam


@pytest.mark.parametrize("layout", ["cpu", "gpu"])
def test_a_view_past_one_binding_of_intersections_renders_clipped_and_says_so(small_ctx, layout):
    """Issue 33, bad input: a view needing more tile intersections than one storage binding holds
    is rendered at the capacity there is (its last pairs dropped) and counted for one line, never
    refused: a training run goes on."""
    seed = fresh_seed()
    model, cam = faint_covering_scene(np.random.default_rng(seed))
    # the layout's own sort threads (16 384 on GPUs): the sorts' (bin, thread) tables are bounded
    # by the binding, as everything else
    kind = Layout.of(small_ctx, layout)
    r = GpuRenderer(small_ctx, layout=kind)
    r.upload_model(model)
    img = r.render(cam, (0.1, 0.2, 0.3))
    for sorter in (r.depth_sort, r.pair_sort):
        if sorter is not None:
            bins = 1 << max(w for _, w in sorter.passes)
            assert 4 * sorter.threads * bins <= SMALL_BINDING, (sorter.name, sorter.threads)
    assert r.capacity == r.max_capacity == SMALL_BINDING // 4, f"seed {seed}"
    assert r.clipped_renders == 1 and r.most_needed > r.max_capacity, f"seed {seed}"
    assert np.isfinite(img).all() and img.shape == (33, 33, 3), f"seed {seed}"
    note = r.clip_note()
    assert f"needed up to {r.most_needed} tile intersections" in note, note
    assert f"the {r.max_capacity} this adapter holds in one storage binding" in note, note

    target = np.full((33, 33, 3), 0.5, np.float32)
    step = GpuTrainStep(small_ctx, model, OptimConfig(), layout=kind)
    for _ in range(3):
        step.step(cam, target, view_id=0)
    losses = step.take_losses()
    assert np.isfinite(losses).all() and step.counters["clipped_renders"] >= 3, f"seed {seed}"
