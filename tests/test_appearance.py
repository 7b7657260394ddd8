"""--appearance (docs/captures.md): a per-view affine colour transform learned with the model.
The reference's gradients against finite differences, the device step against the reference,
the option through cfg.json, the checkpoint and --resume, and the refusals."""

import json

import numpy as np
import pytest

from wgsl_splat.contract import appearance
from wgsl_splat.contract.appearance import AppearanceState
from wgsl_splat.reference.loss import loss_and_grad


def fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    return np.random.default_rng(seed), seed


def random_matrix(rng):
    a = appearance.identity(1)[0].astype(np.float64)
    return a + rng.normal(0, 0.1, a.shape)


def test_reference_gradients_finite_differences():
    rng, seed = fresh_rng()
    img = rng.uniform(0, 1, (9, 11, 3))
    a = random_matrix(rng)
    target = np.clip(appearance.apply(img, a) + rng.normal(0, 0.1, img.shape), 0, 1)

    def loss(img, a):
        return loss_and_grad(appearance.apply(img, a), target)[0]

    _, d_out, _ = loss_and_grad(appearance.apply(img, a), target)
    d_img, d_a = appearance.backward(img, a, d_out)
    h = 1e-6
    fd_a = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = h
        fd_a[idx] = (loss(img, a + e) - loss(img, a - e)) / (2 * h)
    assert np.linalg.norm(fd_a - d_a) / np.linalg.norm(d_a) < 1e-5, f"seed={seed}"
    fd_img = np.zeros_like(img)
    for idx in list(np.ndindex(img.shape))[::7]:
        e = np.zeros_like(img)
        e[idx] = h
        fd_img[idx] = (loss(img + e, a) - loss(img - e, a)) / (2 * h)
    sel = np.zeros(img.shape, bool)
    sel.reshape(-1)[::7] = True
    assert np.linalg.norm(fd_img[sel] - d_img[sel]) / np.linalg.norm(d_img[sel]) < 1e-5


def test_identity_transform_changes_nothing():
    rng, _ = fresh_rng()
    img = rng.uniform(0, 1, (5, 6, 3)).astype(np.float32)
    a = appearance.identity(1)[0]
    assert np.array_equal(appearance.apply(img, a), img)
    d = rng.normal(size=img.shape).astype(np.float32)
    assert np.array_equal(appearance.backward(img, a, d)[0], d)


def _steps(gpu_ctx, seed, layout=None, centring=1.0):
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.gpu.layout import Layout
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.reference.step import CpuTrainStep
    from wgsl_splat.tools.gradcheck import make_problem

    model, cam, target = make_problem(seed, 90, 40, 28, background=(0.1, 0.2, 0.3))
    rng = np.random.default_rng(seed)
    start = AppearanceState.fresh(3)
    start.params[1] = random_matrix(rng).astype(np.float32)
    start.params[2] = random_matrix(rng).astype(np.float32)    # the mean is not the identity
    spec = StepSpec(OptimConfig(appearance_centring=centring), (0.1, 0.2, 0.3),
                    appearance_views=3)
    out = []
    for make in (lambda a: CpuTrainStep(a, spec=spec),
                 lambda a: GpuTrainStep(gpu_ctx, a, spec=spec, layout=Layout.of(gpu_ctx, layout))):
        step = make(HostArrays.fresh(model.copy()))
        step.load_appearance(AppearanceState.from_arrays(
            {k: v.copy() for k, v in start.to_arrays().items()}))
        step.step(cam, target, view_id=1)
        out.append((step.state.download(), step.appearance_state()))
    return out


@pytest.mark.parametrize("layout, centring", [("cpu", 1.0), ("gpu", 1.0), ("gpu", 0.0)])
def test_gpu_step_with_appearance_matches_reference(gpu_ctx, layout, centring):
    """After one step (either layout) Adam's first moment is 0.1 × the gradient: the matrix's
    gradient (the photo's plus the centring term) and, through Aᵀ, every parameter's agree with
    the reference; the other views' matrices do not move."""
    from wgsl_splat.tools.gradcheck import rel_error

    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    (cpu, cpu_app), (gpu, gpu_app) = _steps(gpu_ctx, seed, layout, centring)
    assert rel_error(gpu_app.m[1], cpu_app.m[1])[0] < 1e-3, f"seed {seed}"
    assert rel_error(gpu_app.params[1], cpu_app.params[1])[0] < 1e-5, f"seed {seed}"
    assert list(gpu_app.steps) == list(cpu_app.steps) == [0, 1, 0]
    assert np.array_equal(gpu_app.params[0], appearance.identity(1)[0])
    assert np.array_equal(gpu_app.params[2], cpu_app.params[2])
    for name, m in cpu.adam.m.arrays().items():
        assert rel_error(gpu.adam.m.arrays()[name], m)[0] < 1e-3, f"seed {seed} {name}"


def test_centring_adds_its_term_to_the_gradient_and_only_moves_the_common_map():
    """The reference step's first moment differs between centring 2 and 0 by exactly 0.1 × the
    term (the photo's part is the same); the term is the mean's distance from the identity."""
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.contract.state import HostArrays
    from wgsl_splat.contract.step import StepSpec
    from wgsl_splat.reference.step import CpuTrainStep
    from wgsl_splat.tools.gradcheck import make_problem

    rng, seed = fresh_rng()
    model, cam, target = make_problem(seed, 60, 32, 24, background=(0.1, 0.2, 0.3))
    start = AppearanceState.fresh(4)
    for v in (1, 2, 3):
        start.params[v] = random_matrix(rng).astype(np.float32)
    moments = {}
    for strength in (0.0, 2.0):
        step = CpuTrainStep(HostArrays.fresh(model.copy()),
                            spec=StepSpec(OptimConfig(appearance_centring=strength),
                                          (0.1, 0.2, 0.3), appearance_views=4))
        step.load_appearance(AppearanceState.from_arrays(
            {k: v.copy() for k, v in start.to_arrays().items()}))
        step.step(cam, target, view_id=2)
        moments[strength] = step.appearance_state().m[2].astype(np.float64)
    term = appearance.centring_grad(start.params, 2.0)
    expect = 2.0 * (start.params.astype(np.float64).mean(axis=0) - appearance.identity(1)[0])
    np.testing.assert_allclose(term, expect, atol=1e-6)
    np.testing.assert_allclose(moments[2.0] - moments[0.0], 0.1 * term, atol=1e-6)
    same = np.repeat(appearance.identity(1), 5, axis=0)
    assert not appearance.centring_grad(same, 3.0).any()      # all at the identity: no pull


def test_run_records_appearance_and_resumes_it_exactly(tmp_path):
    """cfg.json and the checkpoint carry it; a run resumed half-way (NumPy path: exact) ends
    with the same matrices as the run that was not interrupted; held-out views never train one."""
    from test_trainer import run, tiny_config

    cfg = tiny_config(8)
    cfg.checkpoint_every = 4
    cfg.appearance = True
    run(tmp_path / "a", cfg)
    assert json.loads((tmp_path / "a" / "cfg.json").read_text())["appearance"] is True
    scored = json.loads((tmp_path / "a" / "metrics.json").read_text())["iteration_8"]
    assert {"fit_psnr", "fit_ssim", "fit_l1"} <= set(scored["mean"])        # its protocol too
    assert all("fit_psnr" in v for v in scored["per_view"].values())
    with np.load(tmp_path / "a" / "checkpoints" / "ckpt_000008.npz") as z:
        whole = {k: z[k] for k in z.files if k.startswith("appearance.")}
    assert whole["appearance.params"].shape == (16, 3, 4) and whole["appearance.steps"].sum() == 8
    assert whole["appearance.steps"][0] == 0 and whole["appearance.steps"][8] == 0   # held out
    run(tmp_path / "b", cfg)
    (tmp_path / "b" / "checkpoints" / "ckpt_000008.npz").unlink()
    run(tmp_path / "b", cfg, resume="latest")
    with np.load(tmp_path / "b" / "checkpoints" / "ckpt_000008.npz") as z:
        for k, v in whole.items():
            assert np.array_equal(z[k], v), k


def test_appearance_refusals_in_one_line(tmp_path):
    from click.testing import CliRunner
    from test_datasets import save_png

    from wgsl_splat.app.cli import main

    save_png(tmp_path / "one.png", np.zeros((16, 16, 3), np.uint8))
    res = CliRunner().invoke(main, ["train", str(tmp_path / "one.png"), "--out",
                                    str(tmp_path / "r"), "--device", "cpu", "--appearance",
                                    "--eval", "--iters", "2"])
    assert res.exit_code != 0
    line = [x for x in res.output.splitlines() if x.startswith("Error")]
    assert len(line) == 1 and "--appearance with --eval" in line[0], res.output
    assert not (tmp_path / "r" / "cfg.json").exists()
    res = CliRunner().invoke(main, ["train", "default", "--out", str(tmp_path / "r3"),
                                    "--appearance", "--devices", "0", "--iters", "2"])
    assert res.exit_code != 0 and "does not combine with --devices" in res.output


def _run_passes(ctx, *encoders):
    enc = ctx.device.create_command_encoder()
    cpass = enc.begin_compute_pass()
    for encode in encoders:
        encode(cpass)
    cpass.end()
    ctx.queue.submit([enc.finish()])


@pytest.mark.parametrize("tiles", [True, False], ids=["tiles", "rows"])
@pytest.mark.parametrize("width,height", [(37, 23), (5, 40), (333, 275)])
def test_gpu_appearance_kernels_on_images_off_the_tile(gpu_ctx, width, height, tiles):
    """The three kernels alone, in both layouts (Layout.per_view_tiles), on sides that are not
    multiples of the 16×16 tile nor of the 64 rows per workgroup, 333×275 with 378 tiles (not a
    multiple of app_update's 256 threads, more than one round of them): fresh random inputs and a
    prior Adam state, every output poisoned with NaN first, so a pixel left unwritten, a partial
    read before it is written or summed twice shows; the other views' matrices do not move."""
    from wgsl_splat.contract import per_view
    from wgsl_splat.gpu.appearance import GpuAppearance
    from wgsl_splat.gpu.device import Gpu
    from wgsl_splat.tools.gradcheck import rel_error

    rng, seed = fresh_rng()
    gpu = Gpu.of(gpu_ctx)
    pool, lr, px = gpu.pool, 2e-3, width * height
    state = AppearanceState.fresh(3)
    for v in range(3):
        state.params[v] = random_matrix(rng)
        state.m[v] = rng.normal(0, 1e-3, (3, 4))
        state.v[v] = rng.uniform(0, 1e-5, (3, 4))
    state.steps[:] = (4, 2, 7)
    image = rng.uniform(0, 1, (height, width, 3)).astype(np.float32)
    grad = (rng.uniform(-1, 2, image.shape) * 1e-3).astype(np.float32)   # sums that do not cancel
    app = GpuAppearance(gpu, 3, lr, tiles=tiles)
    app.upload(state)
    app.prepare(1, width, height)
    for name, data in (("image", image), ("grad_app", grad)):
        pool.get(name, 12 * px)
        pool.write(name, data)
    pool.get("grad_image", 12 * px)
    for name in ("image_app", "grad_image", "app_partials"):
        pool.write(name, np.full(pool.size(name) // 4, np.nan, np.float32))
    _run_passes(gpu_ctx, app.encode_apply, app.encode_backward)

    a = state.params[1].copy()
    got = pool.read_array("image_app", np.float32, 3 * px).reshape(image.shape)
    np.testing.assert_allclose(got, appearance.apply(image, a), rtol=1e-6, atol=1e-6,
                               err_msg=f"seed {seed}")
    d_img, d_a = appearance.backward(image, a, grad)
    got = pool.read_array("grad_image", np.float32, 3 * px).reshape(image.shape)
    np.testing.assert_allclose(got, d_img, rtol=1e-6, atol=1e-9, err_msg=f"seed {seed}")
    expect = AppearanceState.from_arrays({k: v.copy() for k, v in state.to_arrays().items()})
    per_view.adam_update(expect, 1, d_a, lr)
    out = app.download()
    assert list(out.steps) == list(expect.steps) == [4, 3, 7]
    assert rel_error(out.m[1], expect.m[1])[0] < 1e-5, f"seed {seed}"
    assert rel_error(out.params[1] - a, expect.params[1] - a)[0] < 1e-4, f"seed {seed}"
    for v in (0, 2):
        for k in ("params", "m", "v"):
            assert np.array_equal(getattr(out, k)[v], getattr(state, k)[v]), f"view {v} {k}"
