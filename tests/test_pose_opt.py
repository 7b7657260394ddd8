"""--pose-opt (docs/captures.md): a 6-DoF correction of every training view's pose learned with the
model. The reference's view-matrix gradient and the correction's against finite differences, the
step, the option through cfg.json, the checkpoint and --resume, and the refusals."""

import numpy as np
import pytest

from wgsl_splat.render_config import ANTIALIASED, CLASSIC
from wgsl_splat.training import pose


def fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    return np.random.default_rng(seed), seed


def random_delta(rng, rot=0.05, trans=0.05):
    return np.concatenate([rng.normal(0, trans, 3), rng.normal(0, rot, 3)])


def test_so3_exp_jacobian_finite_differences():
    rng, seed = fresh_rng()
    for w in (np.zeros(3), rng.normal(0, 0.03, 3), rng.normal(0, 1.0, 3)):
        r = pose.so3_exp(w)
        assert np.allclose(r @ r.T, np.eye(3), atol=1e-12) and np.linalg.det(r) > 0
        jac = pose.so3_exp_jacobian(w)
        h = 1e-6
        for k in range(3):
            e = np.zeros(3)
            e[k] = h
            fd = (pose.so3_exp(w + e) - pose.so3_exp(w - e)) / (2 * h)
            assert np.abs(fd - jac[k]).max() < 1e-8, f"seed={seed} w={w} k={k}"


@pytest.mark.parametrize("config", [CLASSIC, ANTIALIASED], ids=["classic", "antialiased"])
def test_view_matrix_gradient_finite_differences(config):
    """A loss linear in every projected quantity (random weights on the means, conics, colours
    with their view direction, opacities): the correction's gradient through the 3×4 view-matrix
    gradient agrees with central differences of the projection."""
    from wgsl_splat.reference.projection import project, project_backward
    from wgsl_splat.tools.random_scene import random_scene

    rng, seed = fresh_rng()
    model, cam = random_scene(rng, n=60, width=48, height=36)
    filt = rng.uniform(0.0, 0.02, len(model)) if config.antialiased else None
    delta = random_delta(rng)
    base = project(model, pose.refined_camera(cam, delta), 3, config, filt)
    vis = base.visible
    w = [rng.normal(size=a.shape) for a in (base.means2d, base.conics, base.colors)]
    w_opa = rng.normal(size=base.opacities.shape)

    def loss(d):
        p = project(model, pose.refined_camera(cam, d), 3, config, filt)
        return sum(float(np.sum((wi * a)[vis])) for wi, a in
                   zip(w, (p.means2d, p.conics, p.colors))) + float(np.sum((w_opa * p.opacities)[vis]))

    view_grad = np.zeros((3, 4))
    project_backward(model, pose.refined_camera(cam, delta), base, *w, w_opa, view_grad=view_grad)
    analytic = pose.delta_grad(cam.world_to_camera, delta, view_grad)
    h = 1e-6
    fd = np.array([(loss(delta + h * e) - loss(delta - h * e)) / (2 * h) for e in np.eye(6)])
    assert np.linalg.norm(fd - analytic) / np.linalg.norm(fd) < 1e-7, f"seed={seed} {fd} {analytic}"


def test_pose_gradient_through_the_loss_finite_differences():
    """End to end: render, L1 + SSIM, exact backward; the correction's gradient against central
    differences of the loss (float64, the model kept off the forward pass's discrete decisions)."""
    from wgsl_splat.reference import render, render_backward
    from wgsl_splat.reference.loss import loss_and_grad
    from wgsl_splat.tools.gradcheck import make_problem

    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    model, cam, target = make_problem(seed, 50, 32, 24)
    model = model.astype(np.float64)
    target = target.astype(np.float64)
    rng = np.random.default_rng(seed)
    delta = random_delta(rng, 0.002, 0.002)

    def loss(d):
        return loss_and_grad(render(model, pose.refined_camera(cam, d)).image, target)[0]

    out = render(model, pose.refined_camera(cam, delta))
    _, d_img, _ = loss_and_grad(out.image, target)
    view_grad = np.zeros((3, 4))
    render_backward(model, pose.refined_camera(cam, delta), out, d_img, view_grad=view_grad)
    analytic = pose.delta_grad(cam.world_to_camera, delta, view_grad)
    h = 1e-7
    fd = np.array([(loss(delta + h * e) - loss(delta - h * e)) / (2 * h) for e in np.eye(6)])
    assert np.linalg.norm(fd - analytic) / np.linalg.norm(fd) < 1e-5, f"seed={seed} {fd} {analytic}"
