"""Batches of views per step (``--batch-size``): the gradient of the batch's mean loss, statistics
from every view, gsplat's Adam scaling; the NumPy path against the reference pieces, the GPU path
against the NumPy path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from test_gpu_step import fresh_seed
from test_trainer import run, tiny_config

from wgsl_splat.app.cli import main
from wgsl_splat.camera import Camera
from wgsl_splat.contract.optim import AdamState, OptimConfig, adam_step
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.contract.statistics import ndc_grad_norm
from wgsl_splat.contract.step import View
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.reference import render, render_backward
from wgsl_splat.reference.loss import loss_and_grad
from wgsl_splat.reference.step import CpuTrainStep
from wgsl_splat.strategy.adc import ADC_STATS
from wgsl_splat.tools.gradcheck import make_problem


def batch_problem(seed: int, views: int = 3, n: int = 80, w: int = 48, h: int = 40):
    """A model and ``views`` cameras around it, each with its own target image."""
    model, cam, target = make_problem(seed, n, w, h, sh_degree=1)
    rng = np.random.default_rng(seed + 1)
    batch = [View(cam, target, 0)]
    for k in range(1, views):
        eye = np.asarray(cam.center) + rng.normal(0, 0.15, 3)
        other = Camera.look_at(eye, (0.0, 0.0, 0.0), width=w, height=h, fov_x_deg=60)
        img = np.clip(target + rng.normal(0, 0.05, target.shape), 0, 1).astype(np.float32)
        batch.append(View(other, img, k))
    return model, batch


def test_for_batch_is_gsplats_rule():
    base = OptimConfig()
    assert base.for_batch(1) is base
    b4 = base.for_batch(4)
    assert math.isclose(b4.lr_scale, 2.0) and math.isclose(b4.eps, base.eps / 2)
    assert math.isclose(b4.beta1, 0.6) and math.isclose(b4.beta2, 0.996)
    assert math.isclose(b4.lr_for("opacity_logits", 1), 2 * base.lr_for("opacity_logits", 1))
    with pytest.raises(ValueError, match="batch size 10"):
        base.for_batch(10)


def test_cpu_batch_is_the_mean_gradient_with_every_views_statistics():
    seed = fresh_seed()
    model, views = batch_problem(seed)
    config = OptimConfig().with_scene(1.0, 100).for_batch(len(views))
    manual = model.copy()
    step = CpuTrainStep(HostArrays.fresh(model, ADC_STATS), config)
    step.step_batch(views, active_sh_degree=1)

    grad_sum = manual.zeros_like()
    accum = np.zeros(len(model))
    denom = np.zeros(len(model))
    losses = []
    for v in views:
        out = render(manual, v.camera, active_sh_degree=1)
        loss, dimg, _ = loss_and_grad(out.image, v.target)
        losses.append(loss)
        g = render_backward(manual, v.camera, out, dimg)
        for name, a in grad_sum.arrays().items():
            a += g.params.arrays()[name]
        vis = g.visible
        accum[vis] += ndc_grad_norm(g.screen.means2d[vis], v.camera.width, v.camera.height)
        denom[vis] += 1
    for a in grad_sum.arrays().values():
        a *= np.float32(1.0 / len(views))
    adam_step(manual, grad_sum, AdamState.zeros_for(manual), config)
    assert step.take_losses() == losses
    for name, a in step.get_model().arrays().items():
        np.testing.assert_array_equal(a, manual.arrays()[name], err_msg=f"seed {seed} {name}")
    stats = step.state.download().stats
    assert np.array_equal(stats["denom"], denom) and denom.max() > 1, f"seed {seed}"
    np.testing.assert_allclose(stats["grad_accum"], accum, rtol=1e-5, err_msg=f"seed {seed}")


def test_gpu_batch_matches_cpu_batch(gpu_ctx):
    seed = fresh_seed()
    model, views = batch_problem(seed)
    config = OptimConfig().with_scene(1.0, 100).for_batch(len(views))
    cpu = CpuTrainStep(HostArrays.fresh(model.copy(), ADC_STATS), config)
    gpu = GpuTrainStep(gpu_ctx, HostArrays.fresh(model.copy(), ADC_STATS), config)
    cpu.step_batch(views, 1)
    gpu.step_batch(views, 1)
    c, g = cpu.state.download(), gpu.state.download()
    assert g.adam.step == c.adam.step == 1
    for name, a in g.model.arrays().items():
        # One Adam step moves each parameter by ≈ lr·sign(g): equal unless g is ~0 (sign flips).
        close = np.isclose(a, c.model.arrays()[name], rtol=1e-5, atol=1e-6)
        assert close.mean() > 0.99, f"seed {seed}: {name} differs in {np.sum(~close)} entries"
    np.testing.assert_array_equal(g.stats["denom"], c.stats["denom"], err_msg=f"seed {seed}")
    assert c.stats["denom"].max() == len(views)
    seen = c.stats["denom"] > 0
    np.testing.assert_allclose(g.stats["grad_accum"][seen], c.stats["grad_accum"][seen],
                               rtol=1e-3, atol=1e-7, err_msg=f"seed {seed}")
    assert np.allclose(gpu.take_losses(), cpu.take_losses(), rtol=1e-4), f"seed {seed}"


def test_gpu_batch_sums_the_views_gradients(gpu_ctx):
    """The device's sum after accumulate() equals the sum of the views' gradients computed one by
    one (GpuTrainStep.gradients), in float32 noise."""
    seed = fresh_seed()
    model, views = batch_problem(seed)
    config = OptimConfig().with_scene(1.0, 100)
    gpu = GpuTrainStep(gpu_ctx, HostArrays.fresh(model, ADC_STATS), config)
    want = sum(np.concatenate([a.ravel() for a in gpu.gradients(v.camera, v.target, active_sh_degree=1)
                               .params.arrays().values()]) for v in views)
    gpu.accumulate(views, 1)
    sums, maxima = gpu.read_reduction()
    from wgsl_splat.gpu.adam import ParamLayout
    r = gpu.renderer
    got = ParamLayout.unpack(sums[:r.num_params], r.num, r.sh_coeffs)
    got = np.concatenate([a.ravel() for a in got.arrays().values()])
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-4 * scale, f"seed {seed}"
    assert len(maxima) == len(model) and len(sums) == r.num_params + 2 * len(model)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_training_with_batches(tmp_path, device, gpu_ctx):
    cfg = tiny_config(12)
    cfg.batch_size = 2
    kw = {}
    if device == "gpu":
        kw["factory"] = lambda arrays, spec: GpuTrainStep(gpu_ctx, arrays, spec=spec)
    trainer, summary, _ = run(tmp_path, cfg, **kw)
    assert summary["iterations"] == 12 and np.isfinite(summary["final_loss"])
    assert trainer.step.state.download().adam.step == 12
    assert math.isclose(trainer.optim.beta1, 0.8)


def test_batch_size_errors(tmp_path):
    r = CliRunner().invoke(main, ["train", "--batch-size", "0", "--out", str(tmp_path / "a")])
    assert r.exit_code == 2 and "'--batch-size': 0 is not in the range x>=1" in r.output
    r = CliRunner().invoke(main, ["train", "--batch-size", "10", "--preset", "smoke", "--device", "cpu",
                                  "--out", str(tmp_path / "b")])
    assert r.exit_code != 0 and "batch size 10" in r.output and "Traceback" not in r.output
