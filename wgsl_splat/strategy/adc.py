"""3DGS adaptive density control (Kerbl et al. 2023, ``densify_and_prune`` + ``reset_opacity``):
clone small Gaussians and split large ones whose mean screen-space gradient is high, prune the
transparent (and, after the first opacity reset, the huge), reset opacities every 3 000 steps."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import option

from ..reference.rows import MAX_SPLIT_SAMPLES, STREAM_SPLIT, stream
from ..training.state import ADC_STATS, ADCRound, TrainState
from .base import Strategy, register_strategy


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


@register_strategy
class ADC(Strategy):
    """3DGS adaptive density control: clone, split, prune, opacity resets (the reference)."""

    name = "adc"
    Config = ADCConfig
    stat_names = ADC_STATS

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
            report = state.densify_adc(rnd)
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
                    why = ("the most this adapter's storage bindings hold (a lower --sh-degree "
                           "holds more)")
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
