"""A densification strategy written outside the package, through its seams only: its configuration
(options declared on the dataclass), its statistics, its per-row decision in WGSL beside its NumPy
twin, and its schedule. It trains on both paths without a file of wgsl_splat being touched.

The strategy: every ``every`` steps, prune the Gaussians below ``min_opacity`` and clone the
``clone_top`` ones with the largest mean screen-space gradient (the room of the state's grow
operation ranks them by the decision's score)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from wgsl_splat.contract.state import Decided, HostArrays, RowDecision
from wgsl_splat.contract.statistics import DENOM, GRAD_ACCUM
from wgsl_splat.gpu.shaders import unrecorded
from wgsl_splat.model import inverse_sigmoid
from wgsl_splat.options import option
from wgsl_splat.reference.state import HostState
from wgsl_splat.strategy import STRATEGIES, Strategy

PRUNE_CLONE_WGSL = """
struct DecisionParams {
    logit_min: f32,
}

fn decide(i: u32, may_grow: bool) -> Decision {
    let alive = opacity_logit(i) >= dp.logit_min;
    let seen = stat_denom(i) > 0.0;
    var d: Decision;
    d.keep = alive;
    d.clone = alive && seen && may_grow;
    d.split = false;
    d.cost = select(0u, 1u, alive && seen);
    d.counts = vec3<u32>(select(0u, 1u, !alive), select(0u, 1u, seen), 0u);
    d.peak = stat_grad_accum(i);
    return d;
}
"""


class PruneCloneDecision(RowDecision):
    wgsl = PRUNE_CLONE_WGSL
    score_stats = ("grad_accum", "denom")

    def __init__(self, min_opacity: float) -> None:
        self.logit_min = np.float32(inverse_sigmoid(min_opacity))

    def params(self) -> dict:
        return {"logit_min": self.logit_min}

    def score(self, stats):
        return stats["grad_accum"].astype(np.float64) / np.maximum(stats["denom"], 1.0)

    def numpy(self, a: HostArrays, may_grow: np.ndarray) -> Decided:
        alive = a.model.opacity_logits.astype(np.float32) >= self.logit_min
        seen = a.stats["denom"] > 0
        counts = np.stack([~alive, seen, np.zeros_like(seen)], axis=1).astype(np.int64)
        return Decided(alive, alive & seen & may_grow, np.zeros_like(alive),
                       (alive & seen).astype(np.int64), counts, a.stats["grad_accum"])


@dataclass
class PruneCloneConfig:
    """Prune the transparent, clone the strongest gradients."""

    PRESETS = {"smoke": dict(every=4)}
    every: int = option(8, "Steps between rounds.", minimum=1)
    stop: int = option(20, "No round after this step.", minimum=0)
    min_opacity: float = option(0.05, "Prune below this opacity.", minimum=0.0, maximum=1.0)
    clone_top: int = option(30, "Clone this many, the strongest mean gradients first.", minimum=0)


class PruneClone(Strategy):
    """Prune below an opacity, then clone the top-gradient rows."""

    name = "test_prune_clone"
    Config = PruneCloneConfig
    statistics = (GRAD_ACCUM, DENOM)

    def __init__(self, config, ctx) -> None:
        super().__init__(config, ctx)
        self.rounds = 0

    def after_step(self, iteration, state):
        c = self.config
        if iteration >= c.stop or iteration % c.every:
            return []
        report = state.grow(PruneCloneDecision(c.min_opacity), c.clone_top)
        state.clear_stats()
        self.rounds += 1
        return [f"step {iteration}: pruned {report.counts[0]}, cloned {report.cloned}, "
                f"N {report.after}"]

    def state_dict(self) -> dict:
        return {"rounds": self.rounds}

    def load_state_dict(self, state: dict) -> None:
        self.rounds = int(state.get("rounds", 0))


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(STRATEGIES, PruneClone.name, PruneClone)


def test_the_decision_is_the_same_on_both_paths(gpu_ctx, registered):
    from test_strategy import random_arrays

    from wgsl_splat.gpu.step import GpuTrainStep

    rng = np.random.default_rng(3)
    a = random_arrays(rng, 400, stats=("grad_accum", "denom"))
    a.stats["denom"][::7] = 0                  # some rows unseen: they may not grow
    host = HostState(a)
    decision = PruneCloneDecision(0.3)
    want = host.grow(decision, room=25)
    with unrecorded():   # shader code generated from this file's declarations: not the package's
        gpu = GpuTrainStep(gpu_ctx, a)
        got = gpu.state.grow(decision, room=25)
    assert want == got and want.capped and want.cloned == 25 and want.counts[0] > 0
    h, g = host.download(), gpu.state.download()
    for name, arr in h.model.arrays().items():
        np.testing.assert_array_equal(g.model.arrays()[name], arr, err_msg=name)
    # the clones are those of the strongest mean gradients among the rows that stay
    seen = (a.stats["denom"] > 0) & (a.model.opacities >= 0.3)
    mean_grad = np.where(seen, a.stats["grad_accum"] / np.maximum(a.stats["denom"], 1), -1)
    top = np.sort(np.argsort(-mean_grad, kind="stable")[:25])
    np.testing.assert_array_equal(h.model.means[-25:], a.model.means[top])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_strategy_from_outside_the_package_trains_and_resumes(tmp_path, device, gpu_ctx,
                                                               registered):
    from test_trainer import run, tiny_config

    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.training.config import TrainConfig

    cfg = tiny_config(24)
    cfg.strategy = "test_prune_clone"
    cfg.strategies["test_prune_clone"] = PruneCloneConfig(every=4, stop=20, clone_top=30)
    kw = {}
    if device == "gpu":
        kw["factory"] = lambda arrays, spec: GpuTrainStep(gpu_ctx, arrays, spec=spec)
    with unrecorded():   # shader code generated from this file's declarations: not the package's
        trainer, summary, _ = run(tmp_path / "full", cfg, **kw)
    log = (tmp_path / "full" / "train.log").read_text()
    rounds = [line for line in log.splitlines() if "cloned 30" in line]
    assert len(rounds) == 4 and trainer.strategy.rounds == 4, log     # steps 4, 8, 12, 16
    assert np.isfinite(summary["final_loss"])
    written = json.loads((tmp_path / "full" / "cfg.json").read_text())
    assert written["strategy"] == "test_prune_clone"
    assert written["test_prune_clone"] == {"every": 4, "stop": 20, "min_opacity": 0.05,
                                           "clone_top": 30}
    assert TrainConfig.from_dict(cfg.to_dict()).strategy_config == cfg.strategy_config
    # resume from the checkpoint of step 16: the strategy's state comes back with it
    with unrecorded():
        resumed, rsummary, _ = run(tmp_path / "resumed", cfg,
                                   resume=str(tmp_path / "full" / "checkpoints" / "ckpt_000016.npz"),
                                   **kw)
    assert resumed.strategy.rounds == 4 and rsummary["iterations"] == 24
    if device == "cpu":   # the NumPy path resumes bit for bit
        for name, arr in trainer.step.get_model().arrays().items():
            np.testing.assert_array_equal(resumed.step.get_model().arrays()[name], arr)
