"""3DGS adaptive density control (Kerbl et al. 2023, ``densify_and_prune`` + ``reset_opacity``):
clone small Gaussians and split large ones whose mean screen-space gradient is high, prune the
transparent (and, after the first opacity reset, the huge), reset opacities every 3 000 steps.
One addition: densification ends early when the error of training views it has withheld rises
(:mod:`~wgsl_splat.strategy.growth_validation`; ``validation_every_nth`` 0 is 3DGS's schedule).

A round is one :meth:`~wgsl_splat.contract.state.TrainState.grow` with :class:`ADCDecision`, whose
kernel is ``adc.wgsl`` beside this file and whose NumPy twin is :meth:`ADCDecision.numpy`; the
strategy-neutral state builds and applies the row table on either path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.rows import OFF
from ..contract.state import Decided, HostArrays, TrainState, wgsl_beside
from ..contract.statistics import STANDARD, mean_gradient
from ..options import option
from .base import Strategy, periodic_round, register_strategy
from .growth_validation import GrowthValidation
from .split_clone_prune import (
    SplitCloneDecision,
    SplitCloneRound,
    after_first_reset,
    opacity_reset,
    shared_option,
)

#: what ADC's decisions read: 3DGS's densification statistics
ADC_STATS = STANDARD


@dataclass
class ADCConfig:
    """3DGS adaptive density control (3DGS defaults, docs/design.md §2)."""

    PRESETS = {"smoke": dict(start=50, stop=250, every=50, opacity_reset_every=150),
               "fast": dict(stop=6000)}

    start: int = shared_option("start", flag="--densify-from")
    stop: int = shared_option("stop", flag="--densify-until")
    every: int = shared_option("every", flag="--densify-every")
    grad_threshold: float = shared_option("grad_threshold", flag="--densify-grad-threshold")
    percent_dense: float = shared_option("percent_dense")
    split_samples: int = shared_option("split_samples")
    split_scale_div: float = shared_option("split_scale_div")
    min_opacity: float = shared_option("min_opacity")
    # Off by default: in the original 3DGS code the test reads radii that densification has just
    # reset to zero, so it never fires, and gsplat disables it by default. Enabled (20 px), it
    # deleted 1200-2800 large background Gaussians every 100 steps on the mouse capture and
    # held-out PSNR fell from 21.1 dB at 3000 steps to 19.9 at 7000 (H100 run, 2026-11-22).
    max_screen_size: float = option(
        0.0, "Also prune Gaussians wider than this many pixels after the first reset (0 = off, "
             "as the original 3DGS effectively does).", flag="--prune-screen-size", minimum=0.0)
    max_world_scale: float = shared_option("max_world_scale")
    opacity_reset_every: int = shared_option("opacity_reset_every", flag="--opacity-reset-every")
    reset_opacity: float = shared_option("reset_opacity")
    white_background_reset: bool = shared_option("white_background_reset")
    max_gaussians: int = option(3_000_000, "A hard cap, so a runaway densification cannot eat "
                                           "all memory.", minimum=1)
    # No more trained parameters than the training views give observations (3 per pixel): beyond
    # that the model can only overfit. It binds for small scenes only — the embedded scene (28
    # views of 192×192) at ~52 000 Gaussians, where unbounded growth reached 108 000 and held-out
    # PSNR fell after step 3 000; lego at 800×800 would need 3.2 M, a 200-view 1 MP capture 10 M.
    max_params_per_observation: float = option(
        1.0, "Grow to at most this many trained parameters per observed value (3 per training "
             "pixel); binds only for small scenes (0 = off).",
        flag="--max-params-per-observation", minimum=0.0)
    validation_every_nth: int = shared_option("validation_every_nth")
    validation_interval: int = shared_option("validation_interval")
    validation_tolerance: float = shared_option("validation_tolerance")
    validation_patience: int = shared_option("validation_patience")


@dataclass(frozen=True)
class ADCRound(SplitCloneRound):
    """One adaptive-density-control round, in absolute units (3DGS ``densify_and_prune``).

    Grow where the mean NDC gradient reaches ``grad_threshold``, clone or split, prune (the grown
    model, by each row's source) as :class:`SplitCloneRound` says and, for rows that existed,
    screen radius above ``max_screen_size`` (0: off). At most ``room`` rows may be added: when
    more qualify, the strongest gradients go first."""

    max_screen_size: float
    room: int
    key: int


@dataclass
class DensifyReport:
    cloned: int   # Gaussians duplicated
    split: int    # Gaussians replaced by split_samples samples each
    pruned: int   # Gaussians removed for opacity or size (split originals not counted)
    before: int
    after: int
    seen: int          # Gaussians visible in at least one view since the last round
    max_grad: float    # the largest mean NDC gradient among them
    capped: bool = False   # the room left out some of the Gaussians that qualified

    def line(self) -> str:
        return (f"densify: N {self.before} -> {self.after} (+{self.cloned} cloned, {self.split} split, "
                f"-{self.pruned} pruned; {self.seen} seen, max grad {self.max_grad:.2e})"
                + ("; capped" if self.capped else ""))


class ADCDecision(SplitCloneDecision):
    """ADC's per-row decision (``adc.wgsl``; twin: :meth:`numpy`). Every threshold is compared
    where no transcendental is needed (logits instead of opacities, log-scales instead of scales,
    ``grad_accum >= threshold · max(denom, 1)`` instead of a division), so the float32 decisions
    of the two paths are equal bit for bit. Tallies: qualifying clones, qualifying splits, rows
    seen; peak: the largest mean gradient."""

    wgsl = wgsl_beside(__file__, "adc.wgsl")
    score_stats = ("grad_accum", "denom")

    def params(self) -> dict:
        r = self.rnd
        return dict(screen=np.float32(r.max_screen_size) if r.max_screen_size > 0 else OFF,
                    **r.shared_params())

    def score(self, stats: dict) -> np.ndarray:
        """The mean gradient (float64): the strongest grow first."""
        return mean_gradient(stats)

    def numpy(self, a: HostArrays, may_grow: np.ndarray) -> Decided:
        t = self.params()
        ga = a.stats["grad_accum"].astype(np.float32)
        denom = a.stats["denom"].astype(np.float32)
        logit = a.model.opacity_logits.astype(np.float32)
        max_ls = self.max_log_scale(a)
        high = (ga >= t["grad"] * np.maximum(denom, np.float32(1.0))) & may_grow
        small = max_ls <= t["log_clone"]
        clone, split = high & small, high & ~small
        faint = logit < t["logit_min"]
        keep = ~split & ~faint & ~(max_ls > t["log_world"]) \
            & ~(a.stats["max_radii"].astype(np.float32) > t["screen"])
        keep_clone = clone & ~faint & ~(max_ls > t["log_world"])
        keep_split = split & ~faint & ~((max_ls - t["log_div"]) > t["log_world"])
        seen = denom > 0
        cost = clone.astype(np.int64) + (self.split_samples - 1) * split
        counts = np.stack([clone, split, seen], axis=1).astype(np.int64)
        peak = np.where(seen, ga / np.where(seen, denom, np.float32(1.0)), np.float32(0.0))
        return Decided(keep, keep_clone, keep_split, cost, counts, peak)


def adc_round(state: TrainState, rnd: ADCRound) -> DensifyReport:
    """One ADC round on ``state`` (either path): grow with :class:`ADCDecision`, then the
    statistics back to zero, as 3DGS does after ``densify_and_prune``."""
    g = state.grow(ADCDecision(rnd), rnd.room)
    state.clear_stats()
    n_clone, n_split, seen = g.counts
    grown = g.before + n_clone + (rnd.split_samples - 1) * n_split
    return DensifyReport(n_clone, n_split, grown - g.after, g.before, g.after, seen, g.peak,
                         g.capped)


@register_strategy
class ADC(Strategy):
    """3DGS adaptive density control: clone, split, prune, opacity resets (the reference)."""

    name = "adc"
    Config = ADCConfig
    statistics = ADC_STATS

    def __init__(self, config: ADCConfig, ctx) -> None:
        super().__init__(config, ctx)
        self.cap_logged = False
        self.zero_grad_warned = False
        self.validation = GrowthValidation(config, ctx)

    @property
    def data_cap(self) -> int | None:
        """The Gaussians whose parameters the training views' observations can constrain
        (``max_params_per_observation``), or None without a limit."""
        c, ctx = self.config, self.ctx
        if c.max_params_per_observation <= 0 or not ctx.observations:
            return None
        return max(1, int(c.max_params_per_observation * ctx.observations / ctx.params_per_gaussian))

    @property
    def cap(self) -> int:
        caps = [self.config.max_gaussians, self.ctx.max_gaussians, self.data_cap]
        return min(c for c in caps if c is not None)

    @property
    def refine_stop(self) -> int:
        return self.validation.stop

    def withheld(self, iteration: int) -> frozenset[int]:
        return self.validation.withheld(iteration)

    def round_due(self, iteration: int) -> bool:
        return periodic_round(self.config, iteration, stop=self.validation.stop)

    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        c, it = self.config, iteration
        lines = []
        if self.round_due(it):
            lines += self.validation.check(it, state.n, "adc")
            if not self.validation.skips(it):
                lines += self.run_round(it, state)
        return lines + opacity_reset(c, self.ctx, it, state, self.validation)

    def run_round(self, iteration: int, state: TrainState) -> list[str]:
        """The round at ``iteration``: split, clone and prune; its log lines."""
        c, it = self.config, iteration
        lines = []
        rnd = ADCRound(
            **SplitCloneRound.shared_fields(c, self.ctx, it),
            max_screen_size=c.max_screen_size if after_first_reset(c, it) else 0.0,
            room=max(0, self.cap - state.n))
        report = adc_round(state, rnd)
        lines.append(f"step {it}: {report.line()}")
        if report.max_grad == 0.0 and not self.zero_grad_warned:
            self.ctx.log("WARNING: densification statistics are all zero — no gradient "
                         "reached the screen-space means; no Gaussian can densify.")
            self.zero_grad_warned = True
        if report.capped and self.cap < c.max_gaussians and not self.cap_logged:
            if self.cap == self.data_cap:
                why = (f"as many as the training views' {self.ctx.observations} observed "
                       f"values can constrain (--max-params-per-observation "
                       f"{c.max_params_per_observation:g}; 0 turns this off)")
            else:
                why = ("the most this adapter's memory holds beside the training views "
                       "(WGSL_SPLAT_DEVICE_MEMORY sets it; a lower --sh-degree holds more)")
            self.ctx.log(f"step {it}: densification capped at {self.cap} Gaussians, {why}")
            self.cap_logged = True
        return lines

    def state_dict(self) -> dict:
        return dict(cap_logged=self.cap_logged, zero_grad_warned=self.zero_grad_warned,
                    **self.validation.state_dict())

    def load_state_dict(self, state: dict) -> None:
        self.cap_logged = bool(state.get("cap_logged", False))
        self.zero_grad_warned = bool(state.get("zero_grad_warned", False))
        self.validation.load_state_dict(state)
