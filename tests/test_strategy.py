"""Densification strategies on the NumPy path: the row operations against independent oracles
(3DGS's sequence of clone/split/prune, the MCMC paper's closed form), the schedules, MCMC end to
end with resume, and the bad-input cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from host_rounds import densify_host
from test_trainer import run, tiny_config

from wgsl_splat import counter_rng as crng
from wgsl_splat.app.cli import main
from wgsl_splat.contract.state import (
    KEEP,
    NEW,
    RELOCATE,
    SPLIT,
    HostArrays,
    RowEdit,
    RowTable,
)
from wgsl_splat.data.default_scene import default_dataset
from wgsl_splat.model import GaussianModel
from wgsl_splat.reference import rows
from wgsl_splat.reference.projection import quat_to_rotmat
from wgsl_splat.strategy import MCMCConfig
from wgsl_splat.strategy.adc import ADC_STATS, ADCRound
from wgsl_splat.training.config import TrainConfig
from wgsl_splat.training.startup import initial_count


@pytest.fixture
def rng(request):
    seed = int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.name}: seed={seed}")
    return np.random.default_rng(seed)


def random_arrays(rng, n, sh_degree=1, stats=ADC_STATS) -> HostArrays:
    model = GaussianModel.random(n, rng, sh_degree=sh_degree, dtype=np.float32)
    a = HostArrays.fresh(model, stats)
    for mom in (a.adam.m, a.adam.v):
        for arr in mom.arrays().values():
            arr[...] = rng.normal(size=arr.shape)
    a.adam.step = 42
    if "denom" in a.stats:
        a.stats["denom"][:] = rng.integers(0, 5, n)
        a.stats["grad_accum"][:] = a.stats["denom"] * rng.uniform(0, 4e-4, n)
    if "max_radii" in a.stats:
        a.stats["max_radii"][:] = rng.integers(0, 40, n)
    return a


def three_dgs_round(a: HostArrays, rnd: ADCRound):
    """The round as 3DGS performs it, one operation after the other on whole arrays
    (``densify_and_clone``, ``densify_and_split``, ``prune_points``), with the split draws of
    :func:`rows.apply_rows` (counter-based) so the results can be compared row for row."""
    n0 = len(a)
    grads = a.stats["grad_accum"].astype(np.float64) / np.maximum(a.stats["denom"], 1)
    max_scale = np.exp(a.model.log_scales.astype(np.float64)).max(axis=1)
    high = grads >= rnd.grad_threshold
    clone = high & (max_scale <= rnd.clone_max_scale)
    model = GaussianModel.concatenate([a.model, a.model.subset(clone)])
    zeros = a.adam.m.map(lambda x: np.zeros((int(clone.sum()),) + x.shape[1:], x.dtype))
    m = GaussianModel.concatenate([a.adam.m, zeros])
    v = GaussianModel.concatenate([a.adam.v, zeros])
    src = np.concatenate([np.arange(n0), np.flatnonzero(clone)])
    split = np.concatenate([high & (max_scale > rnd.clone_max_scale), np.zeros(int(clone.sum()), bool)])
    k, sel = rnd.split_samples, np.flatnonzero(split)
    children, child_src = [], []
    for j in range(k):
        c = model.subset(sel).copy()
        scales = np.exp(c.log_scales.astype(np.float64))
        z = crng.normal3(rnd.key, (src[sel] * rows.MAX_SPLIT_SAMPLES + j).astype(np.uint32))
        rot = quat_to_rotmat(c.normalized_quats.astype(np.float64))
        c.means[:] = (c.means + np.einsum("nij,nj->ni", rot, scales * z)).astype(np.float32)
        c.log_scales[:] = (c.log_scales.astype(np.float64) - math.log(rnd.split_scale_div)).astype(np.float32)
        children.append(c)
        child_src.append(src[sel])
    model = GaussianModel.concatenate([model] + children)
    zeros = m.map(lambda x: np.zeros((k * len(sel),) + x.shape[1:], x.dtype))
    m, v = GaussianModel.concatenate([m, zeros]), GaussianModel.concatenate([v, zeros])
    src = np.concatenate([src] + child_src)
    prune = np.concatenate([split, np.zeros(k * len(sel), bool)])
    prune |= model.opacities < rnd.min_opacity
    if rnd.max_world_scale is not None:
        prune |= np.exp(model.log_scales.astype(np.float64)).max(axis=1) > rnd.max_world_scale
    if rnd.max_screen_size > 0:
        prune[:n0] |= a.stats["max_radii"] > rnd.max_screen_size
    keep = ~prune
    return model.subset(keep), m.subset(keep), v.subset(keep)


@pytest.mark.parametrize("after_reset", [False, True])
def test_adc_round_is_3dgs_sequence_of_operations(rng, after_reset):
    a = random_arrays(rng, 400)
    # log-uniform sizes around the clone/split limit (0.02) and the world-size limit (0.15)
    a.model.log_scales[:] = rng.uniform(np.log(0.002), np.log(0.3), (400, 1)) + np.log([1.0, 0.7, 0.4])
    a.model.opacity_logits[::7] = -8.0            # transparent ones to prune
    rnd = ADCRound(2e-4, 0.02, 2, 1.6, 0.005, 0.15 if after_reset else None,
                   20.0 if after_reset else 0.0, 10**9, key=1234)
    out, report = densify_host(a, rnd)
    model, m, v = three_dgs_round(a, rnd)
    assert len(out) == len(model) == report.after and report.before == 400
    assert report.cloned > 10 and report.split > 10 and report.pruned > 10
    for name, arr in out.model.arrays().items():
        np.testing.assert_allclose(arr, model.arrays()[name], rtol=1e-6, atol=1e-7, err_msg=name)
    for name, arr in out.adam.m.arrays().items():
        np.testing.assert_array_equal(arr, m.arrays()[name], err_msg=name)
        np.testing.assert_array_equal(out.adam.v.arrays()[name], v.arrays()[name], err_msg=name)
    assert out.adam.step == 42 and all(np.all(s == 0) for s in out.stats.values())


def test_adc_room_keeps_the_strongest(rng):
    a = random_arrays(rng, 300)
    a.model.log_scales[:] = np.log(0.001)           # all small: every grower is a clone
    a.model.opacity_logits[:] = 2.0
    a.stats["denom"][:] = 1
    a.stats["grad_accum"][:] = np.linspace(1e-4, 1e-3, 300)   # 200 of them reach 4e-4
    rnd = ADCRound(4e-4, 0.01, 2, 1.6, 0.005, None, 0.0, room=50, key=0)
    out, report = densify_host(a, rnd)
    assert report.capped and report.cloned == 50 and len(out) == 350
    np.testing.assert_array_equal(out.model.means[300:], a.model.means[250:])   # the strongest 50


def test_adc_grows_no_further_than_the_views_observe(tmp_path):
    from wgsl_splat.model import floats_per_gaussian
    from wgsl_splat.strategy import ADC, ADCConfig, StrategyContext

    assert floats_per_gaussian(3) == 59 and floats_per_gaussian(0) == 14
    obs = 3 * 28 * 192 * 192                       # the embedded scene's training views
    ctx = StrategyContext(1.0, False, 0, view_pixels=(192 * 192,) * 28, params_per_gaussian=59)
    assert ctx.observations == obs
    assert ADC(ADCConfig(), ctx).cap == obs // 59 == 52484
    assert ADC(ADCConfig(max_params_per_observation=0.5), ctx).cap == obs // 118
    assert ADC(ADCConfig(max_params_per_observation=0), ctx).cap == 3_000_000
    ctx.max_gaussians = 1000                       # the adapter's limit, when lower, binds
    assert ADC(ADCConfig(), ctx).cap == 1000
    # end to end (NumPy path): the run stops growing at the cap and says why
    from test_trainer import tiny_dataset

    from wgsl_splat.training.startup import training_view_pixels

    assert training_view_pixels(tiny_dataset()) == (32 * 32,) * 14
    cfg = tiny_config()
    cfg.background_fraction = 0.0                                 # the cloud alone: 600 to start with
    cfg.strategies["adc"].max_params_per_observation = 0.88      # 641 Gaussians
    trainer, summary, _ = run(tmp_path, cfg)
    log = (tmp_path / "train.log").read_text()
    assert "densification capped at 641 Gaussians" in log and "observed values" in log, log
    assert 600 < summary["num_gaussians"] <= 641
    # a configuration written before the cap existed resumes without it
    d = cfg.to_dict()
    del d["adc"]["max_params_per_observation"]
    from wgsl_splat.training.config import TrainConfig
    assert TrainConfig.from_dict(d).strategies["adc"].max_params_per_observation == 0.0
    assert TrainConfig.from_dict(cfg.to_dict()).strategies["adc"].max_params_per_observation == 0.88


def test_adc_and_fast_share_one_split_clone_prune_section():
    """The section both strategies share is declared once (strategy/split_clone_prune.py): each
    Config copies a shared option under its declared name, and each decision's DecisionParams
    holds the shared uniform fields, which the round fills."""
    import dataclasses
    import re

    from wgsl_splat.contract.state import wgsl_beside
    from wgsl_splat.strategy import split_clone_prune as scp
    from wgsl_splat.strategy.adc import ADCConfig, ADCDecision
    from wgsl_splat.strategy.fast import FastConfig, FastDecision, FastRound

    for cls in (ADCConfig, FastConfig):
        shared = {f.name: f.metadata["shared"] for f in dataclasses.fields(cls)
                  if "shared" in f.metadata}
        assert len(shared) == len(dataclasses.fields(scp.SplitClonePruneOptions)) == 16, cls
        assert all(k == v for k, v in shared.items()), cls
    fragment = wgsl_beside(scp.__file__, "split_clone_prune.wgsl")
    names = re.findall(r"^\s*(\w+):", fragment, re.M)
    adc = ADCDecision(ADCRound(2e-4, 0.02, 2, 1.6, 0.005, None, 0.0, 10, key=1))
    fast = FastDecision(FastRound(2e-4, 0.02, 2, 1.6, 0.005, 0.3, err_min=1.0, weight_min=0.0,
                                  key=1))
    for decision in (adc, fast):
        assert fragment in decision.wgsl and "#include" not in decision.wgsl
        assert set(names) == set(decision.rnd.shared_params()) <= set(decision.params())


def test_row_table_transforms(rng):
    a = random_arrays(rng, 20)
    table = RowTable([3, 3, 5, 7, 7], [KEEP, NEW, SPLIT, SPLIT, RELOCATE], [0, 0, 1, 0, 0])
    relocated = np.zeros((20, 2), np.float32)
    relocated[7] = (-1.5, -0.25)
    out = rows.apply_rows(a, table, RowEdit(2.0, key=99, relocated=relocated))
    assert len(out) == 5
    np.testing.assert_array_equal(out.model.means[:2], a.model.means[[3, 3]])
    assert np.all(out.adam.m.means[0] == a.adam.m.means[3]) and np.all(out.adam.m.means[1:] == 0)
    assert out.stats["grad_accum"][0] == a.stats["grad_accum"][3] and np.all(out.stats["grad_accum"][1:] == 0)
    np.testing.assert_allclose(out.model.log_scales[2], a.model.log_scales[5] - math.log(2.0), rtol=1e-6)
    # the split draw of (source 5, sample 1) is the counter-based normal of index 5·4 + 1
    z = crng.normal3(99, np.array([21], np.uint32))[0]
    rot = quat_to_rotmat(a.model.normalized_quats[5:6].astype(np.float64))[0]
    expect = a.model.means[5] + rot @ (np.exp(a.model.log_scales[5].astype(np.float64)) * z)
    np.testing.assert_allclose(out.model.means[2], expect, rtol=1e-6)
    assert out.model.opacity_logits[4] == np.float32(-1.5)
    np.testing.assert_allclose(out.model.log_scales[4], a.model.log_scales[7] - 0.25, rtol=1e-6)
    assert np.all(out.model.sh[4] == a.model.sh[7])


def paper_relocation(o: float, n: int) -> tuple[float, float]:
    """Eq. 9 of the MCMC paper, term by term in float64."""
    new_o = 1.0 - (1.0 - o) ** (1.0 / n)
    denom = sum(math.comb(i - 1, k) * (-1) ** k * new_o ** (k + 1) / math.sqrt(k + 1)
                for i in range(1, n + 1) for k in range(i))
    return new_o, o / denom


def test_relocation_formula_is_the_papers_closed_form(rng):
    o = rng.uniform(0.006, 0.999, 200)
    n = rng.integers(1, 52, 200)
    new_o, factor = rows.relocation(o, n)
    for i in range(200):
        po, pf = paper_relocation(o[i], int(n[i]))
        assert new_o[i] == pytest.approx(po, rel=1e-12) and factor[i] == pytest.approx(pf, rel=1e-9)
    # one copy is the identity; n copies of the new opacity composite to the old one
    same_o, same_factor = rows.relocation(o, np.ones(200, int))
    np.testing.assert_allclose(same_o, o, rtol=1e-12)
    np.testing.assert_allclose(same_factor, 1.0, rtol=1e-12)
    np.testing.assert_allclose(1 - (1 - new_o) ** n, o, rtol=1e-10)


def test_relocate_moves_dead_onto_live_in_proportion_to_opacity(rng):
    a = random_arrays(rng, 2000, stats=())
    a.model.opacity_logits[:] = np.where(np.arange(2000) < 1000, -9.0, 0.0)   # half dead
    a.model.opacity_logits[1000:1010] = 4.0     # ten much more opaque live ones
    out, moved = rows.relocate(a, 0.005, key=7)
    assert moved == 1000 and len(out) == 2000
    assert np.all(out.model.opacities > 0.005)
    # every dead row is now a copy of a live one (same SH, quaternion), moments zeroed
    sh = a.model.sh.reshape(2000, -1)
    for d in range(0, 1000, 97):
        match = np.flatnonzero((sh == out.model.sh[d].reshape(-1)).all(axis=1))
        assert len(match) == 1 and match[0] >= 1000
        assert np.all(out.adam.m.sh[d] == 0) and np.all(out.adam.v.means[d] == 0)
    # the opaque ones (weight ~0.98 vs 0.5) are drawn about twice as often
    src = np.array([np.flatnonzero((sh == out.model.sh[d].reshape(-1)).all(axis=1))[0] for d in range(1000)])
    share = np.mean((src >= 1000) & (src < 1010))
    assert 0.01 < share < 0.06     # expected 10·0.982 / (10·0.982 + 990·0.5) ≈ 0.019
    # a drawn source shares its relocated opacity and scale with its copies
    s = src[0]
    d = np.flatnonzero(src == s)
    n = len(d) + 1
    new_o, factor = rows.relocation(np.array([a.model.opacities[s]]), np.array([n]))
    np.testing.assert_allclose(out.model.opacities[[s, *d]], new_o[0], rtol=1e-5)
    expect = np.broadcast_to(a.model.log_scales[s] + np.log(factor[0]), (n, 3))
    np.testing.assert_allclose(out.model.log_scales[[s, *d]], expect, rtol=1e-5, atol=1e-6)


def test_add_by_opacity_and_perturb(rng):
    a = random_arrays(rng, 500, stats=())
    out, added = rows.sample_add(a, 25, 0.005, key=3)
    assert added == 25 and len(out) == 525
    assert np.all(out.adam.m.means[500:] == 0) and np.all(out.adam.v.sh[500:] == 0)
    # perturbation: nearly transparent Gaussians move by ~ their covariance, opaque ones stay
    a.model.opacity_logits[:250] = -12.0
    a.model.opacity_logits[250:] = 3.0
    before = a.model.means.copy()
    rows.perturb_means(a, 1.0, key=5)
    moved = np.linalg.norm(a.model.means - before, axis=1)
    assert np.all(moved[250:] < 1e-9 * (1 + np.abs(before[250:]).max()))
    assert np.median(moved[:250]) > 0


def test_mcmc_run_grows_to_its_cap_and_resumes_exactly(tmp_path):
    cfg = tiny_config(24)
    cfg.strategy = "mcmc"
    cfg.background_fraction = 0.0                  # the cloud alone
    cfg.strategies["mcmc"] = MCMCConfig(cap_max=650, start=4, stop=20, every=4)   # 600 -> 630 -> 650 -> 650
    full, summary, full_losses = run(tmp_path / "full", cfg)
    assert summary["num_gaussians"] == 650
    log = (tmp_path / "full" / "train.log").read_text()
    assert "mcmc: relocated" in log and "added" in log
    ckpt = tmp_path / "full" / "checkpoints" / "ckpt_000016.npz"
    resumed, summary, losses = run(tmp_path / "resumed", cfg, resume=str(ckpt))
    for it in range(17, 25):
        assert losses[it] == full_losses[it], it
    a, b = full.step.get_model(), resumed.step.get_model()
    for name in a.arrays():
        np.testing.assert_array_equal(a.arrays()[name], b.arrays()[name], err_msg=name)


def test_strategy_bad_input(tmp_path):
    runner = CliRunner()
    base = ["train", "--preset", "smoke", "--iters", "4", "-r", "8", "--device", "cpu"]
    res = runner.invoke(main, base + ["--strategy", "mcmc", "--cap-max", "10", "--out", str(tmp_path / "a")])
    start = initial_count(default_dataset(resolution=8), TrainConfig())   # 3 000 and the shell
    assert start > 3000
    assert res.exit_code == 1 and f"--cap-max 10 is below the {start} Gaussians" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(main, base + ["--strategy", "nosuch", "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "'nosuch' is not one of 'adc', 'fast', 'mcmc'" in res.output
    res = runner.invoke(main, base + ["--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    ckpt = tmp_path / "c" / "checkpoints" / "ckpt_000004.npz"
    res = runner.invoke(main, base + ["--strategy", "mcmc", "--resume", str(ckpt),
                                      "--out", str(tmp_path / "d")])
    assert res.exit_code == 1 and "--strategy mcmc disagrees with the run being resumed (adc)" in res.output
    assert {p.name for p in (tmp_path / "d").iterdir()} <= {".lock"}     # nothing written
