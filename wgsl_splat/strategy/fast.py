"""The fast training mode: a budget of Gaussians reached on a schedule, grown where several views
agree that the error is, and a resolution schedule.

After Taming 3DGS (Mallick et al. 2024: densify to a budget, candidates ranked by a score),
FastGS (Ren et al. 2026: a Gaussian is grown only when, over a few sampled views, it is composited
into enough high-error pixels — multi-view consistency) and DashGaussian (Chen et al. 2025: train at
a low resolution first, the number of Gaussians growing with the resolution).

A round (every ``every`` steps from ``start`` to ``stop``):

1. observe ``views`` training views drawn for the round at the current resolution
   (:meth:`~wgsl_splat.contract.step.TrainStep.observe`): per view the render's error map
   ``e = mean_c |render − image|``, min-max normalised as FastGS does
   (:class:`~wgsl_splat.contract.error_maps.ErrorMaps`, on the device on the GPU path); per Gaussian
   the blending weights α·T summed over the high-error pixels (normalised error above
   ``error_threshold``), weighted by ``e``, and over all pixels — the statistics
   ``fast_err_pixels``, ``fast_err`` and ``fast_weight``;
2. one :meth:`~wgsl_splat.contract.state.TrainState.grow` with :class:`FastDecision`: rows whose
   mean screen-space gradient passes 3DGS's threshold *and* whose high-error pixels average at least
   ``min_error_pixels`` per observed view are cloned (small) or split (large); when more qualify than
   the room (the budget curve at this step minus N) holds, those explaining the most error
   (``fast_err``) grow first; nearly transparent rows are pruned;
3. before the growth of a round on the ``validation_interval``, the mean L1 of every
   ``validation_every_nth`` training view, withheld from the steps and the observations while
   densifying: the first time it is more than ``validation_tolerance`` above its lowest so far,
   densification ends there (:mod:`~wgsl_splat.strategy.growth_validation`, shared with ADC).

The budget is ``budget`` Gaussians, or by default ``budget_per_edge_pixel`` Gaussians per pixel of
edge the training views show (:meth:`~wgsl_splat.data.dataset.Dataset.edge_pixels`: the length ×
contrast of their edges, detail finer than a view reduced to ``detail_pixels`` not counted): flat
regions need few Gaussians, and more would become fog (docs/benchmarks.md, issue 36 — mouse's
views of a white desk hold no more than its SfM points, lego's detailed views gained from 1.5–2×
what their pixel count gave). The room grows from the start to ``grow_until``, linearly or
(``budget_ramp``) on Taming's parabola (lego +0.02 to +0.06 dB at the end; on mouse the
validation ends growth first: docs/benchmarks.md, nineteenth session), and, while the
resolution schedule trains below the training resolution, is divided by the square of its
factor (DashGaussian: no more Gaussians than the pixels can constrain). A scene without a point cloud starts from
``init_fraction`` of the budget in random points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.error_maps import ErrorMaps
from ..contract.rows import OFF
from ..contract.state import Decided, HostArrays, TrainState, wgsl_beside
from ..contract.statistics import DENOM, GRAD_ACCUM, OBSERVED, Statistic, mean_gradient
from ..options import option
from .base import Strategy, StrategyError, periodic_round, register_strategy
from .growth_validation import GrowthValidation
from .split_clone_prune import (
    SplitCloneDecision,
    SplitCloneRound,
    opacity_reset,
    shared_option,
)

FAST_ERR_PIXELS = Statistic("fast_err_pixels", OBSERVED)  # Σ α·T over high-error pixels
FAST_ERR = Statistic("fast_err", OBSERVED)                # Σ α·T·e: the error it is part of
FAST_WEIGHT = Statistic("fast_weight", OBSERVED)          # Σ α·T: how much it is seen at all
OBSERVED_STATS = ("fast_err_pixels", "fast_err", "fast_weight")


def parse_schedule(text: str) -> str:
    """``"4@0,2@1000,1@2000"`` (downscale factor @ the step it starts at, steps increasing, the
    first at 0) normalised; ValueError with one line otherwise."""
    try:
        pairs = [tuple(int(x) for x in part.split("@")) for part in str(text).split(",")
                 if part.strip()]
        ok = pairs and all(len(p) == 2 for p in pairs)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"takes FACTOR@STEP pairs, e.g. 4@0,2@500,1@1000; got {text!r}")
    steps = [s for _, s in pairs]
    if pairs[0][1] != 0 or steps != sorted(set(steps)) or any(f < 1 for f, _ in pairs):
        raise ValueError(f"{text!r}: the first pair starts at step 0, the steps increase and the "
                         f"factors are at least 1")
    return ",".join(f"{f}@{s}" for f, s in pairs)


def schedule_pairs(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split("@")) for part in parse_schedule(text).split(",")]


@dataclass
class FastConfig:
    """The fast mode's defaults (one set for every scene; measured in docs/benchmarks.md)."""

    PRESETS = {"smoke": dict(start=30, stop=240, every=30, grow_until=200,
                             resolution_schedule="2@0,1@100")}

    budget: int = option(0, "Gaussians the run grows to (0: --budget-per-edge-pixel of the "
                            "training views' detail).", flag="--budget", minimum=0)
    budget_per_edge_pixel: float = option(
        0.35, "Without --budget: grow to this many Gaussians per pixel of edge the training views "
              "show (edge length x contrast: a flat view needs few).",
        flag="--budget-per-edge-pixel", minimum=0.0, open_min=True)
    detail_pixels: int = option(
        200 * 200, "The views' detail is measured on them reduced to at most this many pixels: "
                   "finer detail does not raise the budget.", minimum=1)
    init_fraction: float = option(0.4, "A scene without a point cloud starts from this fraction "
                                       "of the budget in random points.", minimum=0.0,
                                  maximum=1.0, open_min=True)
    start: int = shared_option("start")
    # the round that reaches the budget is the last: rounds at the budget only prune and regrow,
    # and with the reset's 3 000 steps no reset follows (issue 36: mouse's fog grew back after)
    stop: int = shared_option("stop", 3000)
    every: int = shared_option("every")
    grow_until: int = option(3000, "The budget is reached by this step.", minimum=1)
    budget_ramp: str = option(
        "linear", "How the budget curve rises from the start to grow_until: linearly, or as Taming "
                  "3DGS's parabola (twice as steep at the start, flat at the budget).",
        choices=("linear", "parabola"))
    max_growth: float = option(0.5, "A round adds at most this fraction of N.", minimum=0.0)
    views: int = option(10, "Training views observed per round (FastGS: 10).", minimum=1)
    error_threshold: float = option(
        0.1, "A pixel's error is high above this fraction of the view's range (FastGS).",
        minimum=0.0, maximum=1.0)
    min_error_pixels: float = option(
        0.0, "Grow only Gaussians blended into at least this many high-error pixels (α·T-"
             "weighted) per observed view.", minimum=0.0)
    min_weight: float = option(
        0.0, "Prune Gaussians blended into less than this many pixels' worth (α·T) per "
             "observed view (0: off).", minimum=0.0)
    validation_every_nth: int = shared_option("validation_every_nth")
    validation_interval: int = shared_option("validation_interval")
    validation_tolerance: float = shared_option("validation_tolerance")
    validation_patience: int = shared_option("validation_patience")
    score: str = option("error", "What ranks the rows when more want to grow than the room "
                                 "holds: the error they are part of over the observed views, or "
                                 "3DGS's mean gradient.", choices=("error", "gradient"))
    grad_threshold: float = shared_option(
        "grad_threshold", 0.0, help="Mean NDC gradient ‖∂L/∂μ2D‖ a Gaussian must reach to grow.")
    percent_dense: float = shared_option("percent_dense")
    split_samples: int = shared_option("split_samples")
    split_scale_div: float = shared_option("split_scale_div")
    min_opacity: float = shared_option("min_opacity")
    max_world_scale: float = shared_option("max_world_scale")
    opacity_reset_every: int = shared_option("opacity_reset_every")
    reset_opacity: float = shared_option("reset_opacity")
    white_background_reset: bool = shared_option("white_background_reset")
    resolution_schedule: str = option(
        "1@0", "Downscale factors of the training views over the run, FACTOR@STEP pairs "
               "(e.g. 4@0,2@500,1@1000); must end at 1, the training resolution.",
        flag="--resolution-schedule", parse=parse_schedule, metavar="F@STEP,...")


@dataclass(frozen=True)
class FastRound(SplitCloneRound):
    """One round's thresholds in absolute units (see :class:`FastDecision`): the shared ones, and
    what the observed views must show."""

    err_min: float              # α·T-weighted high-error pixels summed over the observed views
    weight_min: float           # α·T summed over the observed views (0: off)
    key: int
    score: str = "error"


class FastDecision(SplitCloneDecision):
    """The fast strategy's per-row decision (``fast.wgsl``; twin: :meth:`numpy`), compared where
    no transcendental is needed, as ADC's. Tallies: clones, splits, pruned; peak: the largest
    error explained. Score when the room binds: the error a row is part of (``fast_err``)."""

    wgsl = wgsl_beside(__file__, "fast.wgsl")

    def __init__(self, rnd: FastRound) -> None:
        super().__init__(rnd)
        if rnd.score == "error":     # ranked on the device (RowDecision.score)
            self.rank_stat, self.score_stats = "fast_err", ("fast_err",)
        else:
            self.score_stats = ("grad_accum", "denom")

    def score(self, stats: dict) -> np.ndarray:
        return super().score(stats) if self.rank_stat else mean_gradient(stats)

    def params(self) -> dict:
        r, f32 = self.rnd, np.float32
        return dict(err_min=f32(r.err_min),
                    weight_min=f32(r.weight_min) if r.weight_min > 0 else -OFF,
                    **r.shared_params())

    def numpy(self, a: HostArrays, may_grow: np.ndarray) -> Decided:
        t = self.params()
        st = {k: v.astype(np.float32) for k, v in a.stats.items()}
        ga, denom = st["grad_accum"], st["denom"]
        max_ls = self.max_log_scale(a)
        wanted = (ga >= t["grad"] * np.maximum(denom, np.float32(1.0))) \
            & (st["fast_err_pixels"] >= t["err_min"])
        high = wanted & may_grow
        small = max_ls <= t["log_clone"]
        clone, split = high & small, high & ~small
        gone = (a.model.opacity_logits.astype(np.float32) < t["logit_min"]) \
            | (st["fast_weight"] < t["weight_min"]) | (max_ls > t["log_world"])
        keep = ~split & ~gone
        clone = clone & ~gone
        split = split & ~gone & ~((max_ls - t["log_div"]) > t["log_world"])
        cost = np.where(wanted & ~gone, np.where(small, 1, self.split_samples - 1), 0)
        counts = np.stack([clone, split, gone], axis=1).astype(np.int64)
        return Decided(keep, clone, split, cost.astype(np.int64), counts, st["fast_err"])


@register_strategy
class Fast(Strategy):
    """Fast mode: a budget reached on a schedule, growth where several views see error, a
    resolution schedule (Taming 3DGS, FastGS, DashGaussian)"""

    name = "fast"
    Config = FastConfig
    statistics = (GRAD_ACCUM, DENOM, FAST_ERR_PIXELS, FAST_ERR, FAST_WEIGHT)
    run_presets = {
        "smoke": dict(random_init_points=5000),
        # 3DGS's pace is set for 30 000 steps: SH degree 3 by step 1 500 instead of 3 000 and
        # twice its learning rates (docs/benchmarks.md, "SH schedule" and issue 36's "Learning
        # rates for a short run"); at those constant rates the end model is wherever the last
        # views pulled it: its last 4 % (200 steps) at a tenth of them (issue 36's "cool-down")
        "fast": {"iters": 5000, "sh_increase_every": 500, "optim.lr_scale": 2.0,
                 "optim.cooldown_fraction": 0.04,
                 "eval_at": (500, 1000, 2000, 3000, 4000, 5000), "save_at": (5000,)},
    }

    def __init__(self, config: FastConfig, ctx) -> None:
        super().__init__(config, ctx)
        self.n0: int | None = None          # N at the first round (the budget curve's start)
        self.detail_budget: int | None = None   # the budget the views' detail gave (kept on resume)
        self.schedule = schedule_pairs(config.resolution_schedule)
        self.validation = GrowthValidation(config, ctx)

    @classmethod
    def exercise_kernels(cls, step, view) -> None:
        for k in (1, 2, 3):            # observe.wgsl's channel counts
            step.observe([view], ErrorMaps(0.1), OBSERVED_STATS[:k])
        rnd = FastRound(grad_threshold=2e-4, clone_max_scale=0.02, split_samples=2,
                        split_scale_div=1.6, min_opacity=0.005, max_world_scale=0.5, err_min=1.0,
                        weight_min=0.5, key=3)
        step.state.grow(FastDecision(rnd), 10)

    # -- budget and schedules ----------------------------------------------------------------------
    @property
    def derived_budget(self) -> int:
        """The budget from the views' detail (or ``budget`` when given)."""
        c, ctx = self.config, self.ctx
        if c.budget:
            b = c.budget
        elif ctx.edge_pixels is not None:
            if self.detail_budget is None:     # measured once (decodes the training images)
                # a scene's detail grows more slowly than its views' pixels (ADC on lego: 12.7 k
                # Gaussians at 50 px, 299 k at 800 px): detail finer than detail_pixels is not
                # counted
                edges = ctx.edge_pixels(c.detail_pixels)
                self.detail_budget = max(1, int(c.budget_per_edge_pixel * edges))
            b = self.detail_budget
        else:
            b = 1_000_000
        return b if ctx.max_gaussians is None else min(b, ctx.max_gaussians)

    @property
    def budget(self) -> int:
        """The Gaussians the run grows to: a derived budget is never below the starting count (a
        point cloud denser than small views can constrain is kept; only --budget is refused)."""
        b = self.derived_budget
        return b if self.config.budget or self.n0 is None else max(b, self.n0)

    def random_init_points(self, requested: int) -> int:
        return max(1, min(requested, int(self.config.init_fraction * self.derived_budget)))

    def resolution(self, iteration: int) -> int:
        factor = 1
        for f, s in self.schedule:
            if iteration >= s:
                factor = f
        return factor

    def target(self, iteration: int, n0: int) -> int:
        """The Gaussians the run may have after the round at ``iteration``."""
        c = self.config
        span = max(c.grow_until - c.start, 1)
        ramp = min(1.0, max(0.0, (iteration - c.start) / span))
        if c.budget_ramp == "parabola":
            ramp = 1.0 - (1.0 - ramp) ** 2
        f = self.resolution(iteration)
        return int(n0 + max(self.budget - n0, 0) * ramp / (f * f))

    # -- growth validated on withheld training views --------------------------------------------
    @property
    def refine_stop(self) -> int:
        return self.validation.stop

    def withheld(self, iteration: int) -> frozenset[int]:
        return self.validation.withheld(iteration)

    def check(self, initial_count: int) -> None:
        c = self.config
        if c.budget and self.budget < initial_count:
            raise StrategyError(f"the fast strategy's budget (--budget {c.budget}) is below the "
                                f"{initial_count} Gaussians the run starts with: raise it or "
                                f"start from fewer points")
        last_factor, last_step = self.schedule[-1]
        iters = self.ctx.iters
        if last_factor != 1 or (iters is not None and last_step > iters):
            raise StrategyError(f"--resolution-schedule {c.resolution_schedule} does not end at "
                                f"the training resolution (factor 1) within the run's "
                                f"{iters} steps: end it with 1@STEP, STEP ≤ {iters}")

    # -- the hook -------------------------------------------------------------------------------
    def observe(self, iteration: int) -> int:
        """Observe this round's views (the three observed statistics); returns how many."""
        views = self.ctx.views
        if views is None:
            return 0
        withheld = self.withheld(iteration)
        ids = [i for i in views.ids if i not in withheld]
        k = min(self.config.views, len(ids))
        # the same views on both paths and on resume: a function of (seed, step)
        pick = np.random.default_rng([self.ctx.seed, iteration]).permutation(len(ids))[:k]
        chosen = [ids[j] for j in sorted(pick)]
        views.observe(chosen, ErrorMaps(self.config.error_threshold), OBSERVED_STATS,
                      iteration, self.resolution(iteration))
        return k

    def round_due(self, iteration: int) -> bool:
        # the budget's last round
        return periodic_round(self.config, iteration, at_stop=True, stop=self.validation.stop)

    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        c, it = self.config, iteration
        lines = []
        if self.round_due(it):
            if self.n0 is None:
                self.n0 = state.n
            lines += self.validation.check(it, state.n, "fast")
            if not self.validation.skips(it):
                lines.append(self.run_round(it, state))
        return lines + opacity_reset(c, self.ctx, it, state, self.validation)

    def run_round(self, iteration: int, state: TrainState) -> str:
        """The round at ``iteration``: observe, grow within the room, prune; its log line."""
        c, it = self.config, iteration
        room = max(0, min(self.target(it, self.n0) - state.n, int(c.max_growth * state.n) + 1))
        # the views are observed only when their statistics decide something
        needed = (room and (c.score == "error" or c.min_error_pixels > 0)) or c.min_weight > 0
        seen = self.observe(it) if needed else 0
        rnd = FastRound(**SplitCloneRound.shared_fields(c, self.ctx, it),
                        err_min=c.min_error_pixels * seen, weight_min=c.min_weight * seen,
                        score=c.score)
        g = state.grow(FastDecision(rnd), room)
        state.clear_stats()
        return (f"step {it}: fast: N {g.before} -> {g.after} (+{g.cloned} cloned, {g.split} "
                f"split, -{g.counts[2]} pruned; room {room} of budget {self.budget}, "
                f"resolution 1/{self.resolution(it)})" + ("; capped" if g.capped else ""))

    def state_dict(self) -> dict:
        return dict(n0=self.n0, detail_budget=self.detail_budget, **self.validation.state_dict())

    def load_state_dict(self, state: dict) -> None:
        n0, detail = state.get("n0"), state.get("detail_budget")
        self.n0 = None if n0 is None else int(n0)
        self.detail_budget = None if detail is None else int(detail)
        self.validation.load_state_dict(state)
