"""3DGS adaptive density control (Kerbl et al. 2023, ``densify_and_prune`` + ``reset_opacity``):
clone small Gaussians and split large ones whose mean screen-space gradient is high, prune the
transparent (and, after the first opacity reset, the huge), reset opacities every 3 000 steps.

A round is one :meth:`~wgsl_splat.contract.state.TrainState.grow` with :class:`ADCDecision`, whose
kernel is ``adc.wgsl`` beside this file and whose NumPy twin is :meth:`ADCDecision.numpy`; the
strategy-neutral state builds and applies the row table on either path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.rows import OFF, STREAM_SPLIT, stream
from ..contract.state import (
    MAX_SPLIT_SAMPLES,
    Decided,
    HostArrays,
    RowDecision,
    TrainState,
    wgsl_beside,
)
from ..contract.statistics import STANDARD, mean_gradient
from ..options import option
from .base import Strategy, register_strategy, split_clone_prune_params

#: what ADC's decisions read: 3DGS's densification statistics
ADC_STATS = STANDARD


@dataclass
class ADCConfig:
    """3DGS adaptive density control (3DGS defaults, docs/design.md §2)."""

    PRESETS = {"smoke": dict(start=50, stop=250, every=50, opacity_reset_every=150),
               "fast": dict(stop=6000)}

    start: int = option(500, "First densification step.", flag="--densify-from", minimum=0)
    stop: int = option(15_000, "Last densification step.", flag="--densify-until", minimum=0)
    every: int = option(100, "Steps between densifications.", flag="--densify-every", minimum=1)
    grad_threshold: float = option(
        2e-4, "Mean NDC gradient ‖∂L/∂μ2D‖ that triggers densification.",
        flag="--densify-grad-threshold", minimum=0.0)
    percent_dense: float = option(
        0.01, "Clone when the largest scale is at most this × the scene extent, else split.",
        minimum=0.0)
    split_samples: int = option(2, "Samples a split Gaussian becomes.", minimum=2,
                                maximum=MAX_SPLIT_SAMPLES)
    split_scale_div: float = option(1.6, "Split samples' scales are divided by this (0.8 × samples).",
                                    minimum=0.0, open_min=True)
    min_opacity: float = option(0.005, "Prune Gaussians less opaque than this.", minimum=0.0,
                                maximum=1.0)
    # Off by default: in the original 3DGS code the test reads radii that densification has just
    # reset to zero, so it never fires, and gsplat disables it by default. Enabled (20 px), it
    # deleted 1200-2800 large background Gaussians every 100 steps on the mouse capture and
    # held-out PSNR fell from 21.1 dB at 3000 steps to 19.9 at 7000 (H100 run, 2026-11-22).
    max_screen_size: float = option(
        0.0, "Also prune Gaussians wider than this many pixels after the first reset (0 = off, "
             "as the original 3DGS effectively does).", flag="--prune-screen-size", minimum=0.0)
    max_world_scale: float = option(
        0.1, "Prune Gaussians larger than this × the scene extent, after the first reset.",
        minimum=0.0)
    opacity_reset_every: int = option(3000, "Steps between opacity resets while densifying.",
                                      flag="--opacity-reset-every", minimum=1)
    reset_opacity: float = option(0.01, "An opacity reset caps opacities at this.", minimum=0.0,
                                  maximum=1.0, open_min=True)
    # 3DGS (train.py) also resets opacity at the first densification step when the background is
    # white: the grey initial fog is then as visible as the object against the white background
    # and must not be densified (it was 231k floaters at step 3000 on lego without it).
    white_background_reset: bool = option(
        True, "With a white background, also reset opacities at the first densification step.")
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


@dataclass(frozen=True)
class ADCRound:
    """One adaptive-density-control round, in absolute units (3DGS ``densify_and_prune``).

    Grow where the mean NDC gradient reaches ``grad_threshold``: clone when the largest scale is at
    most ``clone_max_scale`` (percent_dense × extent), else split into ``split_samples``; then prune
    (the grown model, by each row's source) opacity < ``min_opacity``, largest scale above
    ``max_world_scale`` (None: off) and, for rows that existed, screen radius above
    ``max_screen_size`` (0: off). At most ``room`` rows may be added: when more qualify, the
    strongest gradients go first."""

    grad_threshold: float
    clone_max_scale: float
    split_samples: int
    split_scale_div: float
    min_opacity: float
    max_world_scale: float | None
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


class ADCDecision(RowDecision):
    """ADC's per-row decision (``adc.wgsl``; twin: :meth:`numpy`). Every threshold is compared
    where no transcendental is needed (logits instead of opacities, log-scales instead of scales,
    ``grad_accum >= threshold · max(denom, 1)`` instead of a division), so the float32 decisions
    of the two paths are equal bit for bit. Tallies: qualifying clones, qualifying splits, rows
    seen; peak: the largest mean gradient."""

    wgsl = wgsl_beside(__file__, "adc.wgsl")
    score_stats = ("grad_accum", "denom")

    def __init__(self, rnd: ADCRound) -> None:
        self.rnd = rnd
        self.split_samples = rnd.split_samples
        self.split_scale_div = rnd.split_scale_div
        self.key = rnd.key

    def params(self) -> dict:
        r, f32 = self.rnd, np.float32
        return dict(
            grad=f32(r.grad_threshold),
            screen=f32(r.max_screen_size) if r.max_screen_size > 0 else OFF,
            **split_clone_prune_params(r.clone_max_scale, r.min_opacity, r.max_world_scale,
                                       r.split_scale_div, r.split_samples))

    def score(self, stats: dict) -> np.ndarray:
        """The mean gradient (float64): the strongest grow first."""
        return mean_gradient(stats)

    def numpy(self, a: HostArrays, may_grow: np.ndarray) -> Decided:
        t = self.params()
        ga = a.stats["grad_accum"].astype(np.float32)
        denom = a.stats["denom"].astype(np.float32)
        ls = a.model.log_scales.astype(np.float32)
        logit = a.model.opacity_logits.astype(np.float32)
        max_ls = ls.max(axis=1) if len(ls) else np.zeros(0, np.float32)
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

    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        c, it = self.config, iteration
        lines = []
        if c.start < it < c.stop and it % c.every == 0:
            after_reset = it > c.opacity_reset_every
            rnd = ADCRound(
                grad_threshold=c.grad_threshold, clone_max_scale=c.percent_dense * self.ctx.extent,
                split_samples=c.split_samples, split_scale_div=c.split_scale_div,
                min_opacity=c.min_opacity,
                max_world_scale=c.max_world_scale * self.ctx.extent if after_reset else None,
                max_screen_size=c.max_screen_size if after_reset else 0.0,
                room=max(0, self.cap - state.n), key=stream(self.ctx.seed, it, STREAM_SPLIT))
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
        white_reset = c.white_background_reset and self.ctx.white_background and it == c.start
        if it < c.stop and (it % c.opacity_reset_every == 0 or white_reset):
            state.reset_opacity(c.reset_opacity)
            lines.append(f"step {it}: opacity reset to ≤ {c.reset_opacity}")
        return lines

    def state_dict(self) -> dict:
        return dict(cap_logged=self.cap_logged, zero_grad_warned=self.zero_grad_warned)

    def load_state_dict(self, state: dict) -> None:
        self.cap_logged = bool(state.get("cap_logged", False))
        self.zero_grad_warned = bool(state.get("zero_grad_warned", False))
