"""The NumPy training step: loss, statistics and Adam wired together."""

from dataclasses import replace

import numpy as np

from wgsl_splat.contract.optim import AdamState, OptimConfig, adam_step
from wgsl_splat.contract.statistics import ndc_grad_norm
from wgsl_splat.reference import loss_and_grad, render, render_backward
from wgsl_splat.reference.step import CpuTrainStep
from wgsl_splat.tools.random_scene import random_scene


def test_step_equals_reference_pipeline_and_fits_a_target():
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    target_model, cam = random_scene(rng, n=40, width=40, height=32, sh_degree=1, edge_cases=False,
                                     dtype=np.float32)
    target = render(target_model, cam).image
    start = target_model.copy()
    start.means += rng.normal(0, 0.05, start.means.shape).astype(np.float32)
    start.sh[:, 0] += rng.normal(0, 0.5, start.sh[:, 0].shape).astype(np.float32)
    # The 3DGS means rate (1.6e-4 per step) cannot undo a 0.05 perturbation in 60 steps; a rate
    # matched to the perturbation makes the fit well posed (measured: worst of 41 seeds reaches
    # 0.25 of the initial loss, against the 0.5 asserted below).
    config = replace(OptimConfig(), means_lr_init=2e-3, means_lr_final=2e-4).with_scene(1.0, 100)

    step = CpuTrainStep(start, config)
    # one step by hand with the same pieces
    manual = start.copy()
    out = render(manual, cam)
    loss0, dimg, _ = loss_and_grad(out.image, target)
    grads = render_backward(manual, cam, out, dimg)
    adam_step(manual, grads.params, AdamState.zeros_for(manual), config)
    step.step(cam, target)
    assert step.take_losses() == [loss0]
    for name, a in step.get_model().arrays().items():
        np.testing.assert_array_equal(a, manual.arrays()[name], err_msg=f"seed {seed} {name}")
    stats = step.state.download().stats
    vis = grads.visible
    np.testing.assert_allclose(stats["grad_accum"][vis], ndc_grad_norm(grads.screen.means2d[vis], 40, 32), rtol=1e-6)
    assert np.all(stats["denom"] == vis) and np.all(stats["grad_accum"][~vis] == 0)

    for _ in range(60):
        step.step(cam, target)
    losses = step.take_losses()
    assert losses[-1] < 0.5 * loss0, f"seed {seed}: loss {loss0} -> {losses[-1]}"
