"""--pose-opt (docs/captures.md): a 6-DoF correction of every training view's pose learned with the
model. The reference's view-matrix gradient and the correction's against finite differences, the
step, the option through cfg.json, the checkpoint and --resume, and the refusals."""

import json

import numpy as np
import pytest

from wgsl_splat.contract import pose
from wgsl_splat.render_config import ANTIALIASED, CLASSIC


def fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    return np.random.default_rng(seed), seed


def random_delta(rng, rot=0.05, trans=0.05):
    return np.concatenate([rng.normal(0, trans, 3), rng.normal(0, rot, 3)])


def loaded_camera(cam, delta):
    """The camera that ``delta`` corrects into ``cam`` (Δ⁻¹·W): the problems are made away from
    the forward pass's discrete decisions for ``cam``, so the corrected pose must be ``cam``."""
    from wgsl_splat.camera import Camera

    w = np.linalg.inv(pose.refined_w2c(np.eye(4), delta)) @ cam.world_to_camera
    return Camera(w, cam.fx, cam.fy, cam.cx, cam.cy, cam.width, cam.height)


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
    cam = loaded_camera(cam, delta)

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


def test_cpu_step_updates_the_trained_view_only():
    """One step on view 1: its correction gets Adam's first step (m = 0.1 × the gradient of the
    correction, the step ±lr for ω and ±lr·extent for τ), view 0 stays at the loaded pose."""
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.reference import render, render_backward
    from wgsl_splat.reference.loss import loss_and_grad
    from wgsl_splat.reference.step import CpuTrainStep
    from wgsl_splat.tools.gradcheck import make_problem, rel_error

    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    model, cam, target = make_problem(seed, 60, 40, 28)
    rng = np.random.default_rng(seed)
    start = pose.PoseState.fresh(2)
    start.params[1] = random_delta(rng, 0.01, 0.01)
    optim = OptimConfig().with_scene(2.0)
    step = CpuTrainStep(HostArrays.fresh(model.copy()),
                        spec=StepSpec(optim, pose_views=2))
    step.load_pose(pose.PoseState.from_arrays({k: v.copy() for k, v in start.to_arrays().items()}))
    step.step(cam, target, view_id=1)
    got = step.pose_state()
    assert list(got.steps) == [0, 1]
    assert np.array_equal(got.params[0], np.zeros(6, np.float32))
    delta = start.params[1].astype(np.float64)
    m32 = model.astype(np.float32)
    out = render(m32, pose.refined_camera(cam, delta))
    _, d_img, _ = loss_and_grad(out.image, target)
    view_grad = np.zeros((3, 4))
    render_backward(m32, pose.refined_camera(cam, delta), out, d_img, view_grad=view_grad)
    g = pose.delta_grad(cam.world_to_camera, delta, view_grad)
    assert rel_error(got.m[1], 0.1 * g)[0] < 1e-5, f"seed {seed}"
    moved = got.params[1] - start.params[1]
    expect = -np.sign(g) * optim.pose_lr * np.array([2.0] * 3 + [1.0] * 3)
    assert np.allclose(moved, expect, rtol=1e-3, atol=1e-7), f"seed {seed}: {moved} {expect}"


def test_run_records_pose_opt_and_resumes_it_exactly(tmp_path):
    """cfg.json and the checkpoint carry it; a run resumed half-way (NumPy path: exact) ends
    with the same corrections as the run that was not interrupted; held-out views never get one."""
    from test_trainer import run, tiny_config

    cfg = tiny_config(8)
    cfg.checkpoint_every = 4
    cfg.pose_opt = True
    run(tmp_path / "a", cfg)
    saved = json.loads((tmp_path / "a" / "cfg.json").read_text())
    assert saved["pose_opt"] is True and saved["optim"]["pose_lr"] == 1e-3
    with np.load(tmp_path / "a" / "checkpoints" / "ckpt_000008.npz") as z:
        whole = {k: z[k] for k in z.files if k.startswith("pose.")}
    assert whole["pose.params"].shape == (16, 6) and whole["pose.steps"].sum() == 8
    assert whole["pose.steps"][0] == 0 and whole["pose.steps"][8] == 0   # held out
    assert np.abs(whole["pose.params"][whole["pose.steps"] > 0]).min() > 0
    run(tmp_path / "b", cfg)
    (tmp_path / "b" / "checkpoints" / "ckpt_000008.npz").unlink()
    run(tmp_path / "b", cfg, resume="latest")
    with np.load(tmp_path / "b" / "checkpoints" / "ckpt_000008.npz") as z:
        for k, v in whole.items():
            assert np.array_equal(z[k], v), k


def test_pose_opt_refusals_in_one_line(tmp_path):
    from click.testing import CliRunner
    from test_datasets import save_png

    from wgsl_splat.app.cli import main

    save_png(tmp_path / "one.png", np.zeros((16, 16, 3), np.uint8))
    res = CliRunner().invoke(main, ["train", str(tmp_path / "one.png"), "--out",
                                    str(tmp_path / "r"), "--device", "cpu", "--pose-opt",
                                    "--iters", "2"])
    assert res.exit_code != 0
    line = [x for x in res.output.splitlines() if x.startswith("Error")]
    assert len(line) == 1 and "--pose-opt needs two or more training views" in line[0], res.output
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [".lock"]   # the folder's lock only
    for extra in (["--devices", "0"], ["--distributed"]):
        res = CliRunner().invoke(main, ["train", "default", "--out", str(tmp_path / "r3"),
                                        "--pose-opt", "--iters", "2", *extra])
        line = [x for x in res.output.splitlines() if x.startswith("Error")]
        assert res.exit_code != 0 and len(line) == 1, res.output
        assert "does not combine with --devices or --distributed" in line[0]
        assert not (tmp_path / "r3").exists()


def _pose_steps(gpu_ctx, seed, config=CLASSIC, layout=None):
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.gpu.layout import Layout
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.reference.step import CpuTrainStep
    from wgsl_splat.tools.gradcheck import make_problem

    model, cam, target = make_problem(seed, 90, 40, 28, background=(0.1, 0.2, 0.3), config=config)
    rng = np.random.default_rng(seed)
    start = pose.PoseState.fresh(3)
    start.params[1] = random_delta(rng, 0.01, 0.01)
    start.params[2] = random_delta(rng, 0.2, 0.02)   # beyond the Taylor branch
    spec = StepSpec(OptimConfig().with_scene(1.5), (0.1, 0.2, 0.3), pose_views=3)
    out = []
    for gpu in (False, True):
        arrays = HostArrays.fresh(model.copy())
        step = (GpuTrainStep(gpu_ctx, arrays, spec=spec, render_config=config,
                             layout=Layout.of(gpu_ctx, layout)) if gpu
                else CpuTrainStep(arrays, spec=spec, render_config=config))
        step.load_pose(pose.PoseState.from_arrays({k: v.copy() for k, v in start.to_arrays().items()}))
        if gpu:   # poisoned: what the step reads must be what it wrote
            step.pool.write("pose_camera", np.full(16, np.nan, np.float32))
            step.pool.write("pose_partials", np.full(step.pool.size("pose_partials") // 4, np.nan,
                                                     np.float32))
        step.step(loaded_camera(cam, start.params[1]), target, view_id=1)
        after_1 = step.state.download()
        step.step(loaded_camera(cam, start.params[2]), target, view_id=2)
        out.append((after_1, step.pose_state()))
    return start, out


@pytest.mark.parametrize("layout", ["cpu", "gpu"])
@pytest.mark.parametrize("config", [CLASSIC, ANTIALIASED], ids=["classic", "antialiased"])
def test_gpu_step_with_pose_opt_matches_reference(gpu_ctx, config, layout):
    """Two steps (views 1 and 2, fresh random corrections), in both layouts: after each, Adam's
    first moment is 0.1 × the correction's gradient on both paths; the model's gradients
    (rendered from the corrected pose) agree; view 0's correction does not move."""
    from wgsl_splat.tools.gradcheck import rel_error

    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    start, ((cpu, cpu_pose), (gpu, gpu_pose)) = _pose_steps(gpu_ctx, seed, config, layout)
    assert list(gpu_pose.steps) == list(cpu_pose.steps) == [0, 1, 1]
    assert np.array_equal(gpu_pose.params[0], np.zeros(6, np.float32))
    for v in (1, 2):
        assert rel_error(gpu_pose.m[v], cpu_pose.m[v])[0] < 1e-3, f"seed {seed} view {v}"
        assert rel_error(gpu_pose.params[v] - start.params[v],
                         cpu_pose.params[v] - start.params[v])[0] < 1e-3, f"seed {seed} view {v}"
    for name, m in cpu.adam.m.arrays().items():
        assert rel_error(gpu.adam.m.arrays()[name], m)[0] < 1e-3, f"seed {seed} {name}"


def test_gpu_pose_opt_reads_nothing_back_inside_steps(gpu_ctx):
    """Steady-state steps over three views create no buffer or bind group and read nothing back
    (the corrected pose is composed and copied on the device); the corrections all move."""
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.tools.gradcheck import make_problem

    model, cam, target = make_problem(int(np.random.SeedSequence().entropy % (1 << 32)), 120, 48, 32)
    step = GpuTrainStep(gpu_ctx, HostArrays.fresh(model), spec=StepSpec(OptimConfig(), pose_views=3),
                        history=64)
    for v in range(3):   # warm-up: capacity check, target uploads, pipelines
        step.step(cam, target, view_id=v)
    step.take_losses()
    before = dict(step.counters)
    for k in range(12):
        step.step(cam, target, view_id=k % 3)
    after = dict(step.counters)
    for key in ("readbacks", "buffers_created", "bind_groups_created", "bytes_allocated"):
        assert after[key] == before[key], f"{key} changed inside 12 steps: {before[key]} -> {after[key]}"
    got = step.pose_state()
    assert list(got.steps) == [5, 5, 5] and np.all(np.abs(got.params).max(axis=1) > 0)
    assert np.all(np.isfinite(step.take_losses()))


def test_gpu_run_saves_and_resumes_pose_opt(tmp_path, gpu_ctx):
    """The GPU path's trainer writes the corrections into the checkpoint and a run resumed
    half-way from it ends where the uninterrupted one does (to float-atomic noise)."""
    from test_trainer import run, tiny_config

    from wgsl_splat.gpu.step import GpuTrainStep

    def factory(arrays, spec):
        return GpuTrainStep(gpu_ctx, arrays, spec=spec)

    cfg = tiny_config(8)
    cfg.checkpoint_every = 4
    cfg.pose_opt = True
    run(tmp_path / "a", cfg, factory=factory)
    with np.load(tmp_path / "a" / "checkpoints" / "ckpt_000008.npz") as z:
        whole = {k: z[k] for k in z.files if k.startswith("pose.")}
    assert whole["pose.steps"].sum() == 8 and whole["pose.steps"][0] == 0
    trained = whole["pose.steps"] > 0
    assert np.all(np.abs(whole["pose.params"][trained]).max(axis=1) > 0)
    assert np.all(whole["pose.params"][~trained] == 0)
    run(tmp_path / "b", cfg, resume=str(tmp_path / "a" / "checkpoints" / "ckpt_000004.npz"),
        factory=factory)
    with np.load(tmp_path / "b" / "checkpoints" / "ckpt_000008.npz") as z:
        assert np.array_equal(z["pose.steps"], whole["pose.steps"])
        np.testing.assert_allclose(z["pose.params"], whole["pose.params"], rtol=1e-3, atol=1e-6)


def test_gpu_pose_gradient_is_the_same_on_one_and_on_many_bindings(gpu_ctx, small_ctx):
    """A paged state (gpu/pages.py; 64 KiB bindings, 6 pages): each page's workgroups write their
    pose partials at global indices and the update sums all of them, and every page's uniform gets
    the corrected pose, so two steps of view 1 move its correction (and the model) as on one
    binding, up to the atomics' reordering. Pose-opt keeps Adam out of project_backward."""
    from test_gpu_pages import N, scene

    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.tools.gradcheck import rel_error

    rng, seed = fresh_rng()
    model, cam, target = scene(seed)
    start = pose.PoseState.fresh(2)
    start.params[1] = random_delta(rng, 0.02, 0.02)
    spec = StepSpec(OptimConfig().with_scene(1.5), pose_views=2)
    out = []
    for ctx in (gpu_ctx, small_ctx):
        step = GpuTrainStep(ctx, HostArrays.fresh(model.copy()), spec=spec)
        assert not step.fused_adam
        step.load_pose(pose.PoseState.from_arrays(
            {k: v.copy() for k, v in start.to_arrays().items()}))
        step.pool.write("pose_partials", np.full(step.pool.size("pose_partials") // 4, np.nan,
                                                 np.float32))
        for _ in range(2):
            step.step(loaded_camera(cam, start.params[1]), target, view_id=1)
        out.append((len(step.renderer.pages), step.backward.pose_partials(),
                    step.pose_state(), step.state.download()))
    (pages_a, parts_a, pa, a), (pages_b, parts_b, pb, b) = out
    assert (pages_a, pages_b) == (1, 6) and parts_a == parts_b == -(-N // 256)
    assert np.all(np.isfinite(pb.m[1])) and np.any(pb.m[1] != 0)
    assert np.array_equal(pb.params[0], np.zeros(6, np.float32))
    assert rel_error(pb.m[1], pa.m[1])[0] < 1e-4, f"seed {seed}"
    assert rel_error(pb.params[1] - start.params[1], pa.params[1] - start.params[1])[0] < 1e-3, \
        f"seed {seed}"
    for name, arr in a.model.arrays().items():
        close = np.isclose(b.model.arrays()[name], arr, rtol=1e-5, atol=1e-6)
        assert close.mean() > 0.99, f"seed {seed}: {name} differs in {np.sum(~close)} entries"


@pytest.mark.parametrize("parallel", [True, False], ids=["workgroup", "serial"])
@pytest.mark.parametrize("partials", [1, 7, 1000])
def test_gpu_pose_update_sums_every_partial_once(gpu_ctx, partials, parallel):
    """The pose update alone, in both layouts (Layout.per_view_tiles), over fresh random partials,
    1000 of them (not a multiple of its 256 threads, several rounds of them) with NaN past the
    count: each is summed once, none past it,
    and the correction's gradient and Adam step are the reference's from their sum (a prior Adam
    state, a rotation beyond the Taylor branch); the other views do not move."""
    from types import SimpleNamespace

    from wgsl_splat.contract import per_view
    from wgsl_splat.gpu.device import Gpu
    from wgsl_splat.gpu.pose import GpuPose
    from wgsl_splat.tools.gradcheck import rel_error

    rng, seed = fresh_rng()
    gpu = Gpu.of(gpu_ctx)
    lr, extent = 1e-3, 1.7
    state = pose.PoseState.fresh(3)
    for v in range(3):
        state.params[v] = random_delta(rng, 0.3, 0.05)
        state.m[v] = rng.normal(0, 1e-3, 6)
        state.v[v] = rng.uniform(0, 1e-5, 6)
    state.steps[:] = (3, 5, 1)
    w2c = np.linalg.inv(pose.refined_w2c(np.eye(4), random_delta(rng, 0.5, 1.0)))
    parts = rng.uniform(-1, 2, (partials, 3, 4)).astype(np.float32) * 1e-3
    gp = GpuPose(gpu, 3, lr, extent, parallel=parallel)
    gp.upload(state)
    gp.prepare(2, SimpleNamespace(world_to_camera=w2c), partials)
    gpu.pool.get("pose_partials", 48 * (partials + 5))
    poisoned = np.full(gpu.pool.size("pose_partials") // 4, np.nan, np.float32)
    poisoned[:parts.size] = parts.reshape(-1)
    gpu.pool.write("pose_partials", poisoned)
    enc = gpu_ctx.device.create_command_encoder()
    cpass = enc.begin_compute_pass()
    gp.encode_update(cpass)
    cpass.end()
    gpu_ctx.queue.submit([enc.finish()])

    w32 = w2c.astype(np.float32).astype(np.float64)   # the uniform's pose
    grad = pose.delta_grad(w32, state.params[2].astype(np.float64),
                           parts.astype(np.float64).sum(axis=0))
    expect = pose.PoseState.from_arrays({k: v.copy() for k, v in state.to_arrays().items()})
    per_view.adam_update(expect, 2, grad, lr, pose.rate_scale(extent))
    got = gp.download()
    assert list(got.steps) == list(expect.steps) == [3, 5, 2]
    assert rel_error(got.m[2], expect.m[2])[0] < 1e-5, f"seed {seed}"
    assert rel_error(got.params[2] - state.params[2],
                     expect.params[2] - state.params[2])[0] < 1e-4, f"seed {seed}"
    for v in (0, 1):
        for k in ("params", "m", "v"):
            assert np.array_equal(getattr(got, k)[v], getattr(state, k)[v]), f"view {v} {k}"
