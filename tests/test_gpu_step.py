"""The training step on the device vs the NumPy reference: gradients per parameter group (every
accumulation variant), loss, Adam, densification statistics, a 200-step fit on both paths, and no
host read-back or allocation inside a step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_gpu_forward import near_integer, three_sigma_radius, threshold_event

from wgsl_splat.camera import Camera
from wgsl_splat.contract.optim import AdamState, OptimConfig, adam_step
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.contract.statistics import ndc_grad_norm
from wgsl_splat.gpu import kernels
from wgsl_splat.gpu.adam import GpuAdam, ParamLayout
from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.loss import GpuLoss
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.model import GaussianModel, rgb_to_sh_dc
from wgsl_splat.reference import loss_and_grad, render
from wgsl_splat.reference.step import CpuTrainStep
from wgsl_splat.tools.gradcheck import (
    TOLERANCE,
    away_from_thresholds,
    compare,
    compare_backward,
    make_problem,
    rel_error,
)
from wgsl_splat.tools.random_scene import random_scene

VARIANTS = [(True, True), (True, False), (False, True), (False, False)]   # float atomics, subgroups


def fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % (1 << 32))


def assert_all_ok(errors, where):
    bad = [f"{e.group}: {e.rel_error:.2e}" for e in errors if not e.ok]
    assert not bad, f"{where}: {', '.join(bad)}"


def variant_ids(v):
    return f"{'float' if v[0] else 'cas'}-{'subgroup' if v[1] else 'workgroup'}"


def require_variant(ctx, variant) -> None:
    """Skip, naming what is missing, a variant whose features the adapter lacks (wgpu's OpenGL
    adapter has neither float atomics nor subgroups)."""
    missing = [f for f, wanted, has in (("shader-float32-atomic", variant[0], ctx.has_float_atomics),
                                        ("subgroup", variant[1], ctx.has_subgroups))
               if wanted and not has]
    if missing:
        pytest.skip(f"{ctx.name} ({ctx.backend}) lacks {' and '.join(missing)}")


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_ids)
@pytest.mark.parametrize("n,size", [(150, (70, 50)), (37, (33, 17))])
def test_gradients_match_reference(gpu_ctx, variant, n, size):
    """Loss-driven: random scenes with the edge cases (behind the camera, off-screen, tiny, huge,
    opaque stacks, beyond the frustum clamp), image sizes not multiples of 16, N not a power of 2."""
    require_variant(gpu_ctx, variant)
    seed = fresh_seed()
    model, cam, target = make_problem(seed, n, *size, background=(0.1, 0.2, 0.3))
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), (0.1, 0.2, 0.3),
                        layout=Layout.of(gpu_ctx, float_atomics=variant[0], subgroups=variant[1]))
    assert_all_ok(compare(step, model, cam, target), f"seed {seed} {step.backward.variant}")


@pytest.mark.parametrize("rows", [4, 8])
def test_discrete_gpu_layout_matches_reference(gpu_ctx, rows):
    """The layout a discrete GPU gets (4 rows per raster thread: 64 threads per tile, backward
    rounds of 64 splats with 32-lane subgroups and 4 without, 16384 sort/emission threads with
    multi-workgroup scans, the tiled loss), on whatever adapter runs the tests."""
    seed = fresh_seed()
    model, cam, target = make_problem(seed, 400, 90, 70)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), layout=Layout.of(
        gpu_ctx, "gpu", raster_rows=rows))
    layout = step.backward.layout
    assert [kernels.backward_round(layout, lanes) for lanes in (1, 8, 32, 64)] == \
        {4: [4, 32, 64, 64], 8: [8, 64, 64, 64]}[rows]
    assert_all_ok(compare(step, model, cam, target), f"seed {seed} rows {rows}")


@pytest.mark.parametrize("degree,active", [(0, None), (1, None), (2, 1), (3, 0), (3, None)])
def test_backward_from_given_image_gradient(gpu_ctx, degree, active):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, 120, 64, 48, sh_degree=degree, dtype=np.float32)
    model = away_from_thresholds(model, cam, (0.0, 0.0, 0.0), rng)
    dimg = rng.normal(0, 1e-3, (cam.height, cam.width, 3)).astype(np.float32)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    errors = compare_backward(step, model, cam, dimg, active_sh_degree=active)
    assert_all_ok(errors, f"seed {seed}")
    sh = step.gradients(cam, dL_dimage=dimg, active_sh_degree=active).params.sh
    k_active = (min(degree, 3 if active is None else active) + 1) ** 2
    assert np.all(sh[:, k_active:] == 0), "bands above the active degree must get no gradient"


def _front_camera(w=64, h=48):
    return Camera.look_at((0.0, 0.0, -4.0), (0.0, 0.0, 0.0), width=w, height=h, fov_x_deg=50)


def _model(means, log_scale=-1.0, opacity_logit=0.0) -> GaussianModel:
    means = np.atleast_2d(np.asarray(means, np.float64))
    n = len(means)
    sh = np.zeros((n, 4, 3))
    sh[:, 0] = rgb_to_sh_dc(np.array([0.8, 0.3, 0.1]))
    sh[:, 1:] = 0.1
    quats = np.tile([1.0, 0.2, -0.1, 0.05], (n, 1))
    # Anisotropic: an isotropic splat's rotation has exactly zero gradient (no relative error).
    log_scales = log_scale + np.array([0.0, -0.4, 0.3])
    return GaussianModel(means, np.tile(log_scales, (n, 1)), quats, np.full(n, opacity_logit),
                         sh).astype(np.float32)


def test_no_visible_splat_has_zero_gradients(gpu_ctx):
    model = _model([[0.0, 0.0, -6.0], [0.3, 0.0, -5.0]])        # all behind the camera
    cam = _front_camera()
    target = np.full((cam.height, cam.width, 3), 0.5, np.float32)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    g = step.gradients(cam, target)
    assert all(np.all(a == 0) for a in g.params.arrays().values())
    ref_loss = loss_and_grad(np.zeros_like(target), target)[0]
    assert abs(g.loss - ref_loss) < 1e-5 * ref_loss


def test_one_splat_covering_the_whole_image(gpu_ctx):
    model = _model([[0.05, -0.02, 0.0]], log_scale=np.log(3.0), opacity_logit=1.0)
    cam = _front_camera(50, 37)
    target = np.random.default_rng(1).uniform(0, 1, (cam.height, cam.width, 3)).astype(np.float32)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    assert_all_ok(compare(step, model, cam, target), "whole-image splat")


def test_more_than_65535_intersections(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    n = 400
    means = rng.uniform(-0.5, 0.5, (n, 3)) * [1, 1, 0.2]
    # Depths at least 5e-4 apart: 400 uniform depths come within float32's rounding of each other
    # in some draws (seeds 0 and 5), and a swapped pair of whole-image splats is a discontinuity
    # of the loss (the sort), not a gradient error; ties are tested in test_gpu_forward.
    means[:, 2] = rng.permutation(np.linspace(-0.1, 0.1, n))
    model = _model(means, log_scale=np.log(2.0),
                   opacity_logit=-4.0)                          # faint and huge: no early stop
    cam = _front_camera(256, 192)                               # 192 tiles per splat
    target = rng.uniform(0, 1, (cam.height, cam.width, 3)).astype(np.float32)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    errors = compare(step, model, cam, target)
    assert step.renderer.last_count > 65535
    assert_all_ok(errors, "more than 65535 intersections")


@pytest.mark.parametrize("variant", ["tiled", "lines"])
@pytest.mark.parametrize("size", [(37, 23), (70, 50), (16, 16)])
def test_loss_matches_reference(gpu_ctx, variant, size):
    rng = np.random.default_rng(fresh_seed())
    w, h = size
    img = rng.uniform(0, 1, (h, w, 3)).astype(np.float32)
    gt = np.clip(img + rng.normal(0, 0.1, img.shape), 0, 1).astype(np.float32)
    gpu_loss = GpuLoss(gpu_ctx, variant=variant)
    loss, grad, parts = gpu_loss.compute(img, gt)
    ref_loss, ref_grad, ref_parts = loss_and_grad(img.astype(np.float64), gt.astype(np.float64))
    assert abs(loss - ref_loss) <= 1e-5 * ref_loss
    assert abs(parts["ssim"] - ref_parts["ssim"]) <= 1e-5 and abs(parts["l1"] - ref_parts["l1"]) <= 1e-6
    assert rel_error(grad, ref_grad)[0] <= 1e-4


def test_adam_matches_reference(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    model = GaussianModel.random(301, rng, sh_degree=3, dtype=np.float32)
    config = OptimConfig().with_scene(2.5, 1000)
    adam = GpuAdam(gpu_ctx, config, zero_grads=True)
    pool = adam.pool
    layout = ParamLayout.flat(len(model), model.sh.shape[1])
    adam.configure(layout)
    pool.write("params", ParamLayout.pack(model))
    state = AdamState.zeros_for(model)
    adam.upload_state(state)
    host = model.copy()
    for _ in range(3):
        grads = model.map(lambda a: rng.normal(0, 1e-2, a.shape).astype(np.float32))
        pool.write("grads", ParamLayout.pack(grads))
        adam.run()
        adam_step(host, grads, state, config)
    gpu = ParamLayout.unpack(pool.read_array("params", np.float32, layout.total), len(model), 16)
    for name, a in gpu.arrays().items():
        np.testing.assert_allclose(a, host.arrays()[name], rtol=1e-6, atol=1e-7, err_msg=name)
    assert not np.any(pool.read_array("grads", np.float32, layout.total)), "gradients are cleared"
    moments = adam.read_state(len(model), 16)
    np.testing.assert_allclose(ParamLayout.pack(moments.v), ParamLayout.pack(state.v), rtol=1e-5)


def _fit_problem(rng):
    """A perturbed copy of a random scene to fit back to its render. Starts with a pixel on a
    discontinuity of the forward pass (test_gpu_forward.threshold_event) are drawn again from the
    same generator: there float32 and float64 may legitimately composite differently, and on a
    40×32 image one such pixel moves the first loss by more than the comparison's 1e-5 (seed
    829138603: one pixel 1.8e-3 apart, the loss 1.6e-5)."""
    while True:
        target_model, cam = random_scene(rng, n=40, width=40, height=32, sh_degree=1,
                                         edge_cases=False, dtype=np.float32)
        target = render(target_model, cam).image.astype(np.float32)
        start = target_model.copy()
        start.means += rng.normal(0, 0.05, start.means.shape).astype(np.float32)
        start.sh[:, 0] += rng.normal(0, 0.5, start.sh[:, 0].shape).astype(np.float32)
        ref = render(start.astype(np.float64), cam)
        if not any(threshold_event(ref, y, x) for y in range(cam.height)
                   for x in range(cam.width)):
            break
    config = replace(OptimConfig(), means_lr_init=2e-3, means_lr_final=2e-4).with_scene(1.0, 200)
    return start, cam, target, config


FIT_MEANS_ATOL = 2e-3   # every mean of the GPU fit within this of the NumPy path's after 200 steps
# A problem is compared only where the NumPy path reproduces itself: rerun from starts one float32
# ulp away (each parameter × (1 + 2⁻²³·z)), its means must end within half the bound. Where they
# do not, rounding alone moves the end point as far as the bound (a Gaussian fading through the
# 1/255 alpha cut, a direction the fit barely constrains), and the GPU's float32, summing in
# another order, differs by as much without any kernel being wrong. Measured over 35 fresh seeds:
# the GPU's largest deviation was 0.3–2.3× one rerun's; 3 problems (9 %) reran 1.0e-3–2.1e-3
# apart, the GPU 0.9e-3–2.3e-3. One rerun can miss (seed 571904914: 4 of 5 reruns ≥ 1.9e-3, one
# 3.7e-4), so RERUNS of them; they cost four fits, so they run only when the GPU's means end beyond
# the bound (a problem within it passes whether or not it would have been drawn again).
STABLE_MEANS = 0.5 * FIT_MEANS_ATOL
RERUNS = 4
MAX_DRAWS = 5


def _one_ulp_apart(model: GaussianModel, rng) -> GaussianModel:
    out = model.copy()
    for a in out.arrays().values():
        a *= (1 + 2.0 ** -23 * rng.standard_normal(a.shape)).astype(a.dtype)
    return out


def _cpu_fit(start, cam, target, config, steps: int) -> CpuTrainStep:
    cpu = CpuTrainStep(start, config)
    for _ in range(steps):
        cpu.step(cam, target, view_id=0)
    return cpu


def _means_apart(a, b) -> float:
    return float(np.abs(a.get_model().means - b.get_model().means).max())


def fit_on_both_paths(gpu_ctx, seed: int, steps: int = 200, config_of=None):
    """``steps`` single-view steps of a _fit_problem drawn from ``seed`` on the NumPy path and the
    GPU step; a problem whose NumPy fit does not reproduce itself (STABLE_MEANS) is drawn again.
    ``config_of(config)``: the GPU's optimiser settings, the same by default (power checks)."""
    rng = np.random.default_rng(seed)
    for _ in range(MAX_DRAWS):
        start, cam, target, config = _fit_problem(rng)
        cpu = _cpu_fit(start, cam, target, config, steps)
        gpu = GpuTrainStep(gpu_ctx, start, config_of(config) if config_of else config)
        for _ in range(steps):
            gpu.step(cam, target, view_id=0)
        if _means_apart(gpu, cpu) <= FIT_MEANS_ATOL or all(
                _means_apart(_cpu_fit(_one_ulp_apart(start, rng), cam, target, config, steps), cpu)
                <= STABLE_MEANS for _ in range(RERUNS)):
            return cpu, gpu
    raise AssertionError(f"seed {seed}: {MAX_DRAWS} problems in a row whose NumPy fit does not "
                         f"reproduce itself")


def assert_same_means(gpu, cpu, seed: int) -> None:
    np.testing.assert_allclose(gpu.get_model().means, cpu.get_model().means,
                               atol=FIT_MEANS_ATOL, err_msg=f"seed {seed}")


def test_200_step_fit_reaches_the_same_loss_on_both_paths(gpu_ctx):
    seed = fresh_seed()
    cpu, gpu = fit_on_both_paths(gpu_ctx, seed)
    lc, lg = cpu.take_losses(), gpu.take_losses()
    assert len(lc) == len(lg) == 200
    assert abs(lg[0] - lc[0]) <= 1e-5 * lc[0], f"seed {seed}: first losses {lg[0]} vs {lc[0]}"
    assert lc[-1] < 0.5 * lc[0] and lg[-1] < 0.5 * lg[0], f"seed {seed}: no fit {lc[-1]}, {lg[-1]}"
    # Same end point: measured over 31 seeds the final losses differed by at most 0.03% of the
    # initial loss (0.9% of the final one); atomic reordering can let two runs drift apart near
    # convergence (once 6.5% of a final loss of 0.002), hence bounds on both scales.
    gap = abs(lg[-1] - lc[-1])
    assert gap <= 0.01 * lc[0] and gap <= 0.1 * lc[-1], f"seed {seed}: final losses {lg[-1]} vs {lc[-1]}"
    assert_same_means(gpu, cpu, seed)


def test_the_fit_comparison_sees_a_means_rate_5_percent_high(gpu_ctx):
    """The power of the fits' comparison: a GPU whose means learning rate is 5 % high ends beyond
    FIT_MEANS_ATOL. Asked of the median of three problems: over 30 fresh problems on lavapipe the
    5 % error ended 2.5e-3–2.5e-2 apart (median ~5e-3), and an H100 drew one that ended 1.66e-3
    apart, so a single problem misses it about one time in 20–30."""
    high = lambda c: replace(c, means_lr_init=1.05 * c.means_lr_init,  # noqa: E731
                             means_lr_final=1.05 * c.means_lr_final)
    apart = {}
    for _ in range(3):
        seed = fresh_seed()
        cpu, gpu = fit_on_both_paths(gpu_ctx, seed, config_of=high)
        apart[seed] = _means_apart(gpu, cpu)
    assert np.median(list(apart.values())) > FIT_MEANS_ATOL, f"seeds: deviations {apart}"


def test_one_step_equals_cpu_step_with_statistics(gpu_ctx):
    seed = fresh_seed()
    model, cam, target = make_problem(seed, 120, 60, 44)
    config = OptimConfig().with_scene(1.0, 100)
    cpu = CpuTrainStep(model, config)
    gpu = GpuTrainStep(gpu_ctx, model, config)
    cpu.step(cam, target)
    gpu.step(cam, target)
    c, g = cpu.state.download(), gpu.state.download()
    mc, ac, sc = c.model, c.adam, c.stats
    mg, ag, sg = g.model, g.adam, g.stats
    assert ag.step == ac.step == 1
    for name, a in mg.arrays().items():
        # One Adam step moves each parameter by ≈ lr·sign(g): equal unless g is ~0 (sign flips).
        close = np.isclose(a, mc.arrays()[name], rtol=1e-5, atol=1e-6)
        assert close.mean() > 0.99, f"seed {seed}: {name} differs in {np.sum(~close)} entries"
    np.testing.assert_array_equal(sg["denom"], sc["denom"], err_msg=f"seed {seed}")
    # radius = ceil(3 sqrt(λmax)): equal, except that where 3 sqrt(λmax) sits on an integer the
    # two float32 computations may round to neighbours (seed 737674470: 150 vs 149)
    conic = render(model.astype(np.float64), cam).proj.conics
    on_integer = near_integer(three_sigma_radius(conic)[0])
    diff = np.abs(sg["max_radii"] - sc["max_radii"])
    assert np.all(diff[~on_integer] == 0) and np.all(diff[on_integer] <= 1), f"seed {seed}"
    assert rel_error(sg["grad_accum"], sc["grad_accum"])[0] <= TOLERANCE, f"seed {seed}"
    assert np.all(sg["grad_accum"][sg["denom"] == 0] == 0)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_no_readback_or_allocation_inside_steps(gpu_ctx, kind):
    """Both layouts: the GPU one's per-splat emission, pair sort and per-view tiles too."""
    model, cam, target = make_problem(fresh_seed(), 200, 64, 48)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), history=64,
                        layout=Layout.of(gpu_ctx, kind))
    for _ in range(3):   # warm-up: capacity check after upload, target upload, pipelines
        step.step(cam, target, view_id=0)
    step.take_losses()
    before = dict(step.counters)
    for _ in range(40):
        step.step(cam, target, view_id=0)
    after = dict(step.counters)
    for key in ("readbacks", "buffers_created", "bind_groups_created", "bytes_allocated"):
        assert after[key] == before[key], f"{key} changed inside 40 steps: {before[key]} -> {after[key]}"
    losses = step.take_losses()
    assert len(losses) == 40 and all(np.isfinite(losses))
    assert step.counters["readbacks"] == before["readbacks"] + 1, "one read for 40 steps' losses"


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_view_errors_on_the_device_match_the_reference(gpu_ctx, kind):
    """The growth validation's measure (``view_errors``): each view's L1 term of the loss,
    summed on the device against its resident image (error_maps.wgsl), only the numbers read
    back. Five views over a ring of two slots (three chunks), a masked target, a second image
    size, intersections past the capacity (the chunk is rendered again, grown); the ring is
    poisoned first, so a slot the device did not write shows, and a second call, the images now
    resident, agrees. The loss kernel's L1 of the same render is the same number."""
    from wgsl_splat.contract.losses import MASKED, l1_term
    from wgsl_splat.contract.step import View

    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    model, cam, target = make_problem(seed, 300, 140, 100)
    small, tiny = cam.scaled(2), cam.scaled(8)
    masked = target.copy()
    masked[rng.uniform(size=target.shape[:2]) < 0.3] = MASKED
    views = [View(cam, target, 0), View(cam, masked, 1),
             View(small, rng.uniform(size=(small.height, small.width, 3)).astype(np.float32), 2),
             View(cam, np.clip(target + 0.1, 0, 1), 3),
             View(small, np.zeros((small.height, small.width, 3), np.float32), 4)]
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), history=2, layout=Layout.of(gpu_ctx, kind))
    step.renderer._set_capacity(1024)       # the least; the tiny view's step needs less
    step.step(tiny, np.zeros((tiny.height, tiny.width, 3), np.float32), view_id=9)   # pending
    step.pool.get("view_errors", 16 * step.history)
    step.pool.write("view_errors", np.full(4 * step.history, np.nan, np.float32))
    before, redos = dict(step.counters), step.renderer.redos
    errors = step.view_errors(views)
    assert step.renderer.redos > redos and step.renderer.capacity > 1024, "the views overflowed"
    assert step.renderer.clipped_renders == 0
    reads = step.counters["readback_bytes"] - before["readback_bytes"]
    assert reads < 4 * 1024, f"{reads} bytes read back: no image should be"
    expected = CpuTrainStep(step.get_model(), OptimConfig()).view_errors(views)   # after the step
    np.testing.assert_allclose(errors, expected, rtol=2e-4, err_msg=f"seed {seed}")
    # the device's L1 is the host's of the same render, masked channels counting zero
    on_host = [l1_term(step.render(v.camera), v.target) for v in views]
    np.testing.assert_allclose(errors, on_host, rtol=1e-5, err_msg=f"seed {seed}")
    assert len(step.take_losses()) == 1, "the training step's loss is kept"
    loss_l1 = step.loss.compute(step.render(cam), target)[2]["l1"]
    np.testing.assert_allclose(errors[0], loss_l1, rtol=1e-5)
    held = [View(v.camera, None, v.view_id) for v in views if step.holds_target(v.view_id)]
    assert len(held) == len(views)
    np.testing.assert_allclose(step.view_errors(held), errors, rtol=1e-6)


def test_a_batch_keeps_its_resident_images_when_the_cache_is_full(gpu_ctx):
    """Views passed without their images (the step holds them) stay resident while a view of
    the same batch is uploaded into a full cache: it goes to the scratch buffer instead of
    evicting them (before, the first upload evicted the least recently used, and the batch's
    next view was no longer there)."""
    from wgsl_splat.contract.step import View

    model, cam, target = make_problem(fresh_seed(), 100, 40, 30)
    images = [target, np.clip(target + 0.1, 0, 1), np.clip(target - 0.1, 0, 1)]
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), target_cache_bytes=2 * target.nbytes)
    for k in (0, 1):
        step.step(cam, images[k], view_id=k)
    assert step.holds_target(0) and step.holds_target(1)
    step.step_batch([View(cam, None, 0), View(cam, images[2], 2), View(cam, None, 1)])
    assert step.holds_target(0) and step.holds_target(1) and not step.holds_target(2)
    errors = step.view_errors([View(cam, None, 1), View(cam, images[2], 2), View(cam, None, 0)])
    assert len(errors) == 3 and np.all(np.isfinite(errors))
    step.step(cam, images[2], view_id=2)      # a batch of its own: the least recently used goes
    assert step.holds_target(2) and step.holds_target(0) != step.holds_target(1)
    assert len(step.take_losses()) == 6


def test_more_steps_than_the_ring_read_once_per_ring(gpu_ctx):
    model, cam, target = make_problem(fresh_seed(), 50, 32, 32)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), history=8)
    step.step(cam, target, view_id=0)
    step.take_losses()
    before = step.counters["readbacks"]
    for _ in range(20):
        step.step(cam, target, view_id=0)
    assert step.counters["readbacks"] - before == 2       # rings full after steps 8 and 16
    assert len(step.take_losses()) == 20


def test_repeated_gradients_vary_only_by_atomic_reordering(gpu_ctx):
    """Determinism: float atomics add the per-tile partial sums of a splat in whatever order the
    tiles finish, so the last bits of a gradient may differ between runs; nothing else does."""
    model, cam, target = make_problem(fresh_seed(), 300, 96, 64)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    a = step.gradients(cam, target)
    b = step.gradients(cam, target)
    assert a.loss == b.loss
    for name, g in a.params.arrays().items():
        assert rel_error(g, b.params.arrays()[name])[0] <= 1e-5, name


def test_capacity_grows_after_upload_before_training(gpu_ctx):
    model, cam, target = make_problem(fresh_seed(), 300, 96, 64)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    step.renderer._set_capacity(1024)                     # far too small for this scene
    step.state.upload(step.state.download())
    step.step(cam, target)
    step.take_losses()
    assert step.renderer.capacity >= step.renderer.last_count > 1024
    assert step.overflowed_steps == 0


def test_state_round_trip(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    model = GaussianModel.random(77, rng, sh_degree=2, dtype=np.float32)
    adam = AdamState(model.map(lambda a: rng.normal(size=a.shape).astype(np.float32)),
                     model.map(lambda a: rng.uniform(size=a.shape).astype(np.float32)), 17)
    stats = {k: rng.uniform(size=77).astype(np.float32) for k in ("grad_accum", "denom", "max_radii")}
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), adam=adam)
    step.state.upload(HostArrays(model, adam, stats))
    back = step.state.download()
    for name, arr in back.model.arrays().items():
        np.testing.assert_array_equal(arr, model.arrays()[name])
    np.testing.assert_array_equal(ParamLayout.pack(back.adam.m), ParamLayout.pack(adam.m))
    assert back.adam.step == 17
    for k, v in stats.items():
        np.testing.assert_array_equal(back.stats[k], v)


def test_densification_statistic_is_ndc_gradient_norm(gpu_ctx):
    model, cam, target = make_problem(fresh_seed(), 80, 48, 40)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    g = step.gradients(cam, target)          # leaves the statistics alone
    assert not np.any(step.state.download().stats["denom"])
    step.step(cam, target)
    stats = step.state.download().stats
    vis = stats["denom"] > 0
    np.testing.assert_allclose(stats["grad_accum"][vis], ndc_grad_norm(g.screen[vis, :2], 48, 40),
                               rtol=1e-4, atol=1e-9)
