"""Adam (PyTorch formula as used by 3DGS), per-group learning rates, schedule, state bookkeeping."""

import math
from dataclasses import replace

import numpy as np
import pytest

from wgsl_splat.contract.optim import (
    LR_GROUPS,
    AdamState,
    OptimConfig,
    adam_step,
    expon_lr,
    get_expon_lr_func,
)
from wgsl_splat.model import PARAM_GROUPS, GaussianModel


def _fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (2 ** 32))
    return np.random.default_rng(seed), seed


def _random_grads(model, rng, zero_rows=()):
    g = model.map(lambda a: rng.normal(0.0, 1.0, a.shape) * 10.0 ** rng.uniform(-6, 1, a.shape))
    for name in PARAM_GROUPS:
        getattr(g, name)[list(zero_rows)] = 0.0  # invisible Gaussians: zero gradient this step
    return g.astype(model.dtype)


def _scalar_adam(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-15):
    """torch.optim.Adam for one scalar, written out."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return p - lr * m_hat / (math.sqrt(v_hat) + eps), m, v


def _reference_lr(name, k, t, extent, max_steps):
    """Learning rate of element (group ``name``, SH coefficient ``k``) written from docs/design.md §2."""
    if name == "means":
        frac = min(t / max_steps, 1.0)
        return 1.6e-4 * extent * (1.6e-6 / 1.6e-4) ** frac
    if name == "sh":
        return 2.5e-3 if k == 0 else 2.5e-3 / 20
    return {"log_scales": 5e-3, "quats": 1e-3, "opacity_logits": 0.025}[name]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_scalar_pytorch_adam(dtype):
    rng, seed = _fresh_rng()
    extent, max_steps, steps = float(rng.uniform(0.5, 5.0)), 6, 8  # runs past max_steps
    config = OptimConfig().with_scene(extent, max_steps)
    model = GaussianModel.random(5, rng, sh_degree=1, dtype=dtype)
    state = AdamState.zeros_for(model)
    init = model.copy()
    ref_p = {n: a.astype(np.float64).copy() for n, a in model.arrays().items()}
    ref_m = {n: np.zeros_like(a) for n, a in ref_p.items()}
    ref_v = {n: np.zeros_like(a) for n, a in ref_p.items()}
    for t in range(1, steps + 1):
        grads = _random_grads(model, rng, zero_rows=[t % 5])
        lrs = adam_step(model, grads, state, config)
        assert state.step == t and lrs == config.lrs(t)
        for name in PARAM_GROUPS:
            g = getattr(grads, name).astype(np.float64)
            for idx in np.ndindex(g.shape):
                k = idx[1] if name == "sh" else None
                lr = _reference_lr(name, k, t, extent, max_steps)
                ref_p[name][idx], ref_m[name][idx], ref_v[name][idx] = _scalar_adam(
                    ref_p[name][idx], g[idx], ref_m[name][idx], ref_v[name][idx], t, lr)
    rtol = 1e-12 if dtype == np.float64 else 1e-5  # for the moments
    for name in PARAM_GROUPS:
        got = getattr(model, name)
        assert got.dtype == dtype and getattr(state.m, name).dtype == dtype
        # float64: the accumulated displacement (what Adam computes) must match to rounding, so
        # that large parameter values cannot hide errors in small updates. float32: the parameters
        # themselves, within a rounding of |p| per step (a small update to a large float32
        # parameter keeps only a few bits, so its displacement cannot be compared tightly).
        p0 = getattr(init, name).astype(np.float64)
        if dtype == np.float64:
            disp, ref_disp = got - p0, ref_p[name] - p0
            err = np.linalg.norm(disp - ref_disp) / np.linalg.norm(ref_disp)
            assert err < 1e-12, f"seed={seed} {name}: rel err {err:.2e}"
        else:
            scale = np.maximum(np.abs(p0), np.abs(ref_p[name])) + 1e-3
            tol = 2 * steps * np.finfo(np.float32).eps * scale
            assert np.all(np.abs(got - ref_p[name]) <= tol), f"seed={seed} {name}"
        for moment, ref in (("m", ref_m[name]), ("v", ref_v[name])):
            got_mom = getattr(getattr(state, moment), name)
            err = np.linalg.norm(got_mom - ref) / np.linalg.norm(ref)
            assert err < rtol, f"seed={seed} {moment}.{name}: rel err {err:.2e}"


def test_group_rates_first_step():
    """At t=1, m̂ = g and v̂ = g², so each element moves by lr·sign(g): the rates are visible."""
    rng, seed = _fresh_rng()
    extent = 3.0
    config = OptimConfig().with_scene(extent, 1000)
    model = GaussianModel.random(6, rng, sh_degree=3)
    before = model.copy()
    grads = model.map(lambda a: rng.choice([-1.0, 1.0], a.shape) * rng.uniform(1e-3, 1.0, a.shape))
    adam_step(model, grads, AdamState.zeros_for(model), config)
    means_lr = 1.6e-4 * extent * 0.01 ** (1 / 1000)
    expected = {"means": means_lr, "log_scales": 5e-3, "quats": 1e-3, "opacity_logits": 0.025}
    for name, lr in expected.items():
        np.testing.assert_allclose(getattr(before, name) - getattr(model, name),
                                   lr * np.sign(getattr(grads, name)), rtol=1e-9, err_msg=f"seed={seed}")
    dsh = before.sh - model.sh
    np.testing.assert_allclose(dsh[:, 0], 2.5e-3 * np.sign(grads.sh[:, 0]), rtol=1e-9)
    np.testing.assert_allclose(dsh[:, 1:], 2.5e-3 / 20 * np.sign(grads.sh[:, 1:]), rtol=1e-9)


def test_zero_gradient_keeps_moving_with_momentum():
    rng, seed = _fresh_rng()
    model = GaussianModel.random(3, rng, sh_degree=0)
    state = AdamState.zeros_for(model)
    config = OptimConfig()
    adam_step(model, model.map(np.ones_like), state, config)
    before = model.copy()
    adam_step(model, model.zeros_like(), state, config)
    assert np.all(model.opacity_logits < before.opacity_logits), f"seed={seed}"


def test_schedule_endpoints_and_midpoint():
    c = OptimConfig().with_scene(2.0, 30_000)
    init, final = 1.6e-4 * 2.0, 1.6e-6 * 2.0
    assert c.lr_for("means", 0) == pytest.approx(init, rel=1e-12)
    assert c.lr_for("means", 30_000) == pytest.approx(final, rel=1e-12)
    assert c.lr_for("means", 60_000) == pytest.approx(final, rel=1e-12)
    assert c.lr_for("means", 15_000) == pytest.approx(math.sqrt(init * final), rel=1e-12)
    assert c.lr_for("means", 7_500) == pytest.approx(init ** 0.75 * final ** 0.25, rel=1e-12)
    assert c.lr_for("means", -1) == 0.0
    for step in (0, 1, 12_345, 30_000):
        assert c.lr_for("sh_dc", step) == 2.5e-3 and c.lr_for("sh_rest", step) == 2.5e-3 / 20
        assert c.lr_for("opacity_logits", step) == 0.025
        assert c.lr_for("log_scales", step) == 5e-3 and c.lr_for("quats", step) == 1e-3
    assert set(c.lrs(10)) == set(LR_GROUPS)
    with pytest.raises(KeyError):
        c.lr_for("sh", 0)


def test_a_cooldown_scales_every_rate_over_the_runs_last_steps_only():
    base = OptimConfig(lr_scale=2.0).with_scene(2.0, 5_000)
    cool = replace(base, cooldown_fraction=0.04, cooldown_factor=0.1)
    assert cool.cooldown_steps == 200
    for step in (1, 2_500, 4_800):                       # the Adam steps are 1-based
        assert cool.lrs(step) == base.lrs(step)
    for step in (4_801, 4_900, 5_000, 5_200):            # a run resumed past its end keeps it
        assert cool.lrs(step) == pytest.approx({g: 0.1 * v for g, v in base.lrs(step).items()},
                                               rel=1e-12)
    assert OptimConfig().cooldown_steps == 0              # off unless asked for
    # a fraction of the run: the same fraction of a 300-step run cools its last 12
    short = replace(cool, max_steps=300)
    assert short.lrs(288) == replace(base, max_steps=300).lrs(288)
    assert short.lrs(289)["sh_dc"] == pytest.approx(0.1 * base.lrs(289)["sh_dc"], rel=1e-12)


def test_lr_scale_multiplies_every_group_and_the_means_whole_schedule():
    base = OptimConfig().with_scene(2.0, 5_000)
    fast = replace(base, lr_scale=2.0)
    for step in (1, 2_500, 5_000, 6_000):
        for group in LR_GROUPS:
            assert fast.lr_for(group, step) == pytest.approx(2.0 * base.lr_for(group, step),
                                                             rel=1e-12), group


def test_schedule_delay_matches_3dgs_formula():
    f = get_expon_lr_func(1e-2, 1e-4, lr_delay_steps=100, lr_delay_mult=0.01, max_steps=1000)
    assert f(0) == pytest.approx(1e-2 * 0.01, rel=1e-12)
    loglerp = math.exp(math.log(1e-2) * 0.95 + math.log(1e-4) * 0.05)
    assert f(50) == pytest.approx((0.01 + 0.99 * math.sin(math.pi / 4)) * loglerp, rel=1e-12)
    assert f(100) == pytest.approx(expon_lr(100, 1e-2, 1e-4, 1000), rel=1e-12)  # delay over
    assert f(1000) == pytest.approx(1e-4, rel=1e-12)
    assert expon_lr(5, 0.0, 0.0, 10) == 0.0
    # Default config: no delay even though delay_mult is 0.01 (3DGS: lr_delay_steps = 0).
    assert OptimConfig().lr_for("means", 0) == pytest.approx(1.6e-4, rel=1e-12)
    delayed = OptimConfig(means_lr_delay_steps=10)
    assert delayed.lr_for("means", 0) == pytest.approx(1.6e-6, rel=1e-12)


def test_bias_corrections():
    c = OptimConfig()
    assert c.bias_corrections(1) == pytest.approx((0.1, 0.001), rel=1e-12)
    with pytest.raises(ValueError):
        c.bias_corrections(0)


def test_extend_select_keep_state_aligned():
    """Adam is element-wise, so pruning/growing model and state together must commute with steps."""
    rng, seed = _fresh_rng()
    config = OptimConfig()
    model = GaussianModel.random(8, rng, sh_degree=1)
    state = AdamState.zeros_for(model)
    for _ in range(3):
        adam_step(model, _random_grads(model, rng), state, config)

    keep = rng.random(8) < 0.6
    keep[0] = True
    full_m, full_s = model.copy(), state.copy()
    sub_m, sub_s = model.subset(keep), state.select(keep)
    assert len(sub_s) == keep.sum() and sub_s.step == 3
    grads = _random_grads(model, rng)
    adam_step(full_m, grads, full_s, config)
    adam_step(sub_m, grads.subset(keep), sub_s, config)
    for name in PARAM_GROUPS:
        np.testing.assert_array_equal(getattr(sub_m, name), getattr(full_m, name)[keep], f"seed={seed}")
        np.testing.assert_array_equal(getattr(sub_s.m, name), getattr(full_s.m, name)[keep])
        np.testing.assert_array_equal(getattr(sub_s.v, name), getattr(full_s.v, name)[keep])

    # Grow: new Gaussians get zero moments; old rows keep theirs; the step count carries on.
    new = GaussianModel.random(3, rng, sh_degree=1)
    grown_m = GaussianModel.concatenate([full_m, new])
    grown_s = full_s.extend(3)
    n_old = len(full_m)
    assert len(grown_s) == n_old + 3 and grown_s.step == full_s.step
    for name in PARAM_GROUPS:
        np.testing.assert_array_equal(getattr(grown_s.m, name)[:n_old], getattr(full_s.m, name))
        assert not getattr(grown_s.m, name)[n_old:].any() and not getattr(grown_s.v, name)[n_old:].any()
    g = _random_grads(grown_m, rng)
    alone_m, alone_s = new.copy(), AdamState.zeros_for(new)
    alone_s.step = grown_s.step
    adam_step(grown_m, g, grown_s, config)
    adam_step(alone_m, g.subset(slice(n_old, None)), alone_s, config)
    for name in PARAM_GROUPS:
        np.testing.assert_array_equal(getattr(grown_m, name)[n_old:], getattr(alone_m, name))
    # Extending an empty state works (densifying from nothing, e.g. after a full prune).
    assert len(AdamState.zeros_for(GaussianModel.empty(1)).extend(2)) == 2


def test_reset_group_and_checkpoint_roundtrip():
    rng, seed = _fresh_rng()
    model = GaussianModel.random(4, rng, sh_degree=2, dtype=np.float32)
    state = AdamState.zeros_for(model)
    adam_step(model, _random_grads(model, rng), state, OptimConfig())
    restored = AdamState.from_arrays(state.to_arrays())
    assert restored.step == 1
    for name in PARAM_GROUPS:
        np.testing.assert_array_equal(getattr(restored.v, name), getattr(state.v, name))
    state.reset_group("opacity_logits")
    assert not state.m.opacity_logits.any() and not state.v.opacity_logits.any()
    assert state.m.means.any(), f"seed={seed}"
    with pytest.raises(KeyError):
        state.reset_group("opacity")
