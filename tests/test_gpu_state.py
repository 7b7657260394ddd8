"""The training state's row operations on the device against the NumPy path (reference/rows.py):
row tables of every kind, the split draws (counter-based random numbers), ADC rounds (including a
capped one), MCMC relocation, growth and position noise, the opacity reset, the regularisers'
gradients — and that a densification round reads back only counts."""

from __future__ import annotations

import numpy as np
import pytest
from host_rounds import densify_host
from test_gpu_step import fresh_seed
from test_strategy import random_arrays

from wgsl_splat.contract.losses import LossConfig
from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import (
    KEEP,
    NEW,
    RELOCATE,
    SPLIT,
    HostArrays,
    RowEdit,
    RowTable,
)
from wgsl_splat.contract.step import View
from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.reference import rows
from wgsl_splat.reference.step import CpuTrainStep
from wgsl_splat.strategy.adc import ADCRound, adc_round
from wgsl_splat.tools.random_scene import random_scene


def device_state(gpu_ctx, arrays: HostArrays, **kw) -> GpuTrainStep:
    return GpuTrainStep(gpu_ctx, arrays, OptimConfig(), **kw)


def assert_arrays_close(got: HostArrays, want: HostArrays, rtol=2e-6, atol=2e-6, exact=()):
    assert len(got) == len(want)
    for name, arr in want.model.arrays().items():
        if name in exact:
            np.testing.assert_array_equal(got.model.arrays()[name], arr, err_msg=name)
        else:
            np.testing.assert_allclose(got.model.arrays()[name], arr, rtol=rtol, atol=atol, err_msg=name)
    for which in ("m", "v"):
        for name, arr in getattr(want.adam, which).arrays().items():
            np.testing.assert_array_equal(getattr(got.adam, which).arrays()[name], arr,
                                          err_msg=f"adam.{which}.{name}")
    assert got.adam.step == want.adam.step
    assert set(got.stats) == set(want.stats)
    for name, arr in want.stats.items():
        np.testing.assert_array_equal(got.stats[name], arr, err_msg=name)


def test_row_table_of_every_kind(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    a = random_arrays(rng, 300, sh_degree=2)
    n_out = 520                                   # grows: the buffers are rebuilt at a new size
    src = rng.integers(0, 300, n_out)
    kind = rng.choice([KEEP, NEW, SPLIT, RELOCATE], n_out)
    sample = rng.integers(0, 4, n_out)
    relocated = np.stack([rng.normal(0, 2, 300), rng.normal(0, 0.3, 300)], 1).astype(np.float32)
    table, edit = RowTable(src, kind, sample), RowEdit(1.6, key=12345, relocated=relocated)
    step = device_state(gpu_ctx, a)
    step.state.apply(table, edit)
    want = rows.apply_rows(a, table, edit)
    # copies are exact; the split draws (f32 Box-Muller on the device) and log-scale shifts agree
    # to float32 rounding
    grown = step.state.download()
    assert_arrays_close(grown, want, exact=("quats", "opacity_logits", "sh"))
    assert step.num_gaussians == n_out
    # and back down: a table that prunes (pure copies: exact)
    keep = RowTable(np.arange(0, n_out, 3), KEEP)
    step.state.apply(keep)
    assert_arrays_close(step.state.download(), rows.apply_rows(grown, keep), rtol=0, atol=0)


def test_adc_round_matches_the_numpy_path(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    a = random_arrays(rng, 2000)
    a.model.log_scales[:] = rng.uniform(np.log(0.002), np.log(0.3), (2000, 1)) + np.log([1.0, 0.7, 0.4])
    a.model.opacity_logits[::9] = -8.0
    for rnd in (ADCRound(2e-4, 0.02, 2, 1.6, 0.005, None, 0.0, 10**9, key=77),
                ADCRound(2e-4, 0.02, 3, 2.4, 0.005, 0.15, 20.0, 10**9, key=78),
                ADCRound(2e-4, 0.02, 2, 1.6, 0.005, 0.15, 0.0, room=150, key=79)):   # capped
        want, report = densify_host(a, rnd)
        step = device_state(gpu_ctx, a)
        got_report = adc_round(step.state, rnd)
        assert got_report.capped == report.capped
        assert (got_report.cloned, got_report.split, got_report.pruned, got_report.after) == \
               (report.cloned, report.split, report.pruned, report.after), rnd
        assert got_report.seen == report.seen
        assert got_report.max_grad == pytest.approx(report.max_grad, rel=1e-6)
        assert_arrays_close(step.state.download(), want, exact=("quats", "opacity_logits", "sh"))
    assert report.capped and report.cloned + report.split <= 150


def test_densify_round_reads_back_only_counts(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    a = random_arrays(rng, 20000)
    step = device_state(gpu_ctx, a)
    before = dict(step.counters)
    adc_round(step.state, ADCRound(2e-4, 0.02, 2, 1.6, 0.005, None, 0.0, 10**9, key=1))
    step.state.reset_opacity(0.01)
    after = step.counters
    assert after["readbacks"] - before["readbacks"] == 1
    assert after["readback_bytes"] - before["readback_bytes"] <= 32


@pytest.mark.parametrize("antialiased", [False, True])
def test_opacity_reset(gpu_ctx, antialiased):
    from wgsl_splat.render_config import ANTIALIASED, CLASSIC

    rng = np.random.default_rng(fresh_seed())
    a = random_arrays(rng, 500)
    a.model.opacity_logits[:] = rng.uniform(-3, 5, 500)
    step = device_state(gpu_ctx, a, render_config=ANTIALIASED if antialiased else CLASSIC)
    f = None
    if antialiased:
        f = rng.uniform(0.0, 0.05, 500).astype(np.float32)
        step.pool.write("filter3d", f)
    step.state.reset_opacity(0.01)
    want = HostArrays(a.model.copy(), a.adam.copy(), dict(a.stats))
    rows.reset_opacity(want, 0.01, f)
    got = step.state.download()
    if antialiased:
        np.testing.assert_allclose(got.model.opacity_logits, want.model.opacity_logits, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got.model.opacity_logits, want.model.opacity_logits)
    assert np.all(got.adam.m.opacity_logits == 0) and np.all(got.adam.v.opacity_logits == 0)
    np.testing.assert_array_equal(got.adam.m.means, a.adam.m.means)


def test_mcmc_relocation_growth_and_noise_match_the_numpy_path(gpu_ctx):
    rng = np.random.default_rng(fresh_seed())
    a = random_arrays(rng, 3000, stats=())
    a.model.opacity_logits[:] = rng.uniform(-4, 4, 3000)
    a.model.opacity_logits[::5] = -9.0                         # dead
    step = device_state(gpu_ctx, a)
    want, moved = rows.relocate(a, 0.005, key=21)
    assert step.state.relocate(0.005, key=21) == moved > 500
    # same draws (integer weights); relocated opacities/scales to float32 (the device's pow and the
    # alternating series of eq. 9 in f32)
    got = step.state.download()
    np.testing.assert_array_equal(got.model.sh, want.model.sh)            # the same sources
    np.testing.assert_allclose(got.model.opacity_logits, want.model.opacity_logits, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(got.model.log_scales, want.model.log_scales, rtol=2e-4, atol=2e-4)
    assert_arrays_close(got, want, rtol=2e-4, atol=2e-4, exact=("means", "quats", "sh"))
    # Growth from the same rows on both paths: the relocated logits above agree to 2e-4 only, and
    # one that lies by the rounding boundary of the sampling table's index (round(64·logit)) gets
    # another integer weight, so every later draw shifts (it happened: 1 row of 400).
    step = device_state(gpu_ctx, want)
    want2, added = rows.sample_add(want, 400, 0.005, key=22)
    assert step.state.sample_add(400, 0.005, key=22) == added == 400
    got2 = step.state.download()
    np.testing.assert_array_equal(got2.model.sh, want2.model.sh)
    assert_arrays_close(got2, want2, rtol=2e-4, atol=2e-4, exact=("means", "quats", "sh"))
    # position noise (float32 Box-Muller and covariance on the device)
    step.state.perturb_means(0.05, key=23)
    rows.perturb_means(want2, 0.05, key=23)
    np.testing.assert_allclose(step.state.download().model.means, want2.model.means, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_regularisers_and_noise_in_the_step_match_the_numpy_path(gpu_ctx, kind):
    """All three parameter terms in project_backward, in both layouts (the GPU one's threads)."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, n=150, width=48, height=40, sh_degree=1, edge_cases=False,
                              dtype=np.float32)
    target = rng.uniform(0, 1, (40, 48, 3)).astype(np.float32)
    reg = LossConfig(opacity_reg=0.3, scale_reg=0.2, opacity_entropy=0.25)  # large: they dominate
                                                                        # some gradients
    arrays = HostArrays.fresh(model, ())
    cpu = CpuTrainStep(arrays, OptimConfig(), loss=reg)
    gpu = GpuTrainStep(gpu_ctx, arrays, OptimConfig(), loss=reg, layout=Layout.of(gpu_ctx, kind))
    for noise in (None, (1e-3, 5)):
        cpu.step(cam, target, noise=noise)
        gpu.step(cam, target, noise=noise)
    c, g = cpu.state.download().model, gpu.state.download().model
    for name, arr in c.arrays().items():
        close = np.isclose(g.arrays()[name], arr, rtol=1e-4, atol=1e-5)
        assert close.mean() > 0.99, f"seed {seed}: {name}"


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_both_paths_report_the_loss_with_its_parameter_terms(gpu_ctx, kind):
    """The reported loss is image loss + parameter terms on both paths (the device adds the terms'
    value, reduced in project_backward, to its loss ring), for single views and in a batch, in
    both layouts."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, n=700, width=48, height=40, sh_degree=1, edge_cases=False,
                              dtype=np.float32)       # 700: three workgroups of partial sums
    target = rng.uniform(0, 1, (40, 48, 3)).astype(np.float32)
    plain, terms = LossConfig(), LossConfig(opacity_reg=0.3, scale_reg=0.2, opacity_entropy=0.25)
    losses = {}
    for name, loss in (("plain", plain), ("terms", terms)):
        arrays = HostArrays.fresh(model, ())
        for path, step in (("cpu", CpuTrainStep(arrays, OptimConfig(), loss=loss)),
                           ("gpu", GpuTrainStep(gpu_ctx, arrays, OptimConfig(), loss=loss,
                                                layout=Layout.of(gpu_ctx, kind)))):
            step.step(cam, target)
            step.step_batch([View(cam, target, 1), View(cam, target, 1)])
            losses[name, path] = np.array(step.take_losses())
    p = model.opacities.astype(np.float64)
    expected = terms.opacity_reg * p.mean() + terms.scale_reg * np.exp(
        model.log_scales.astype(np.float64)).mean() + terms.opacity_entropy * np.mean(
        -p * np.log(p) - (1 - p) * np.log(1 - p))
    for path in ("cpu", "gpu"):
        assert len(losses["terms", path]) == 3
        np.testing.assert_allclose(losses["terms", path][0] - losses["plain", path][0], expected,
                                   rtol=1e-5, err_msg=f"seed {seed}: {path}")
    np.testing.assert_allclose(losses["terms", "gpu"], losses["terms", "cpu"], rtol=1e-5,
                               err_msg=f"seed {seed}")
