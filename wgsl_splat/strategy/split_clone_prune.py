"""The split/clone/prune section that ADC and the fast strategy share, declared once: its options
(:func:`shared_option`), a round's thresholds (:class:`SplitCloneRound`), the ``DecisionParams``
fields they become (``split_clone_prune.wgsl``, included by ``adc.wgsl`` and ``fast.wgsl``), the
decision's common half (:class:`SplitCloneDecision`) and the opacity reset (:func:`opacity_reset`).

A strategy's ``Config`` lists the shared options it has, in its own order: that order is the
order of ``cfg.json`` and of the configuration every checkpoint embeds, which a shared base class
would change (dataclass inheritance puts the base's fields first).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract.rows import OFF, STREAM_SPLIT, stream
from ..contract.state import MAX_SPLIT_SAMPLES, HostArrays, RowDecision, TrainState
from ..model import inverse_sigmoid
from ..options import option


@dataclass
class SplitClonePruneOptions:
    """The shared options as 3DGS sets them (ADC's defaults); never a section itself: a strategy's
    ``Config`` copies each it has with :func:`shared_option`."""

    start: int = option(500, "First densification step.", minimum=0)
    stop: int = option(15_000, "Last densification step.", minimum=0)
    every: int = option(100, "Steps between densifications.", minimum=1)
    grad_threshold: float = option(
        2e-4, "Mean NDC gradient ‖∂L/∂μ2D‖ that triggers densification.", minimum=0.0)
    percent_dense: float = option(
        0.01, "Clone when the largest scale is at most this × the scene extent, else split.",
        minimum=0.0)
    split_samples: int = option(2, "Samples a split Gaussian becomes.", minimum=2,
                                maximum=MAX_SPLIT_SAMPLES)
    split_scale_div: float = option(1.6, "Split samples' scales are divided by this (0.8 × samples).",
                                    minimum=0.0, open_min=True)
    min_opacity: float = option(0.005, "Prune Gaussians less opaque than this.", minimum=0.0,
                                maximum=1.0)
    max_world_scale: float = option(
        0.1, "Prune Gaussians larger than this × the scene extent, after the first reset.",
        minimum=0.0)
    opacity_reset_every: int = option(3000, "Steps between opacity resets while densifying.",
                                      minimum=1)
    reset_opacity: float = option(0.01, "An opacity reset caps opacities at this.", minimum=0.0,
                                  maximum=1.0, open_min=True)
    # 3DGS (train.py) also resets opacity at the first densification step when the background is
    # white: the grey initial fog is then as visible as the object against the white background
    # and must not be densified (it was 231k floaters at step 3000 on lego without it).
    white_background_reset: bool = option(
        True, "With a white background, also reset opacities at the first densification step.")
    # growth_validation.py: the rule that ends densification early when it overfits
    validation_every_nth: int = option(
        10, "Withhold every Nth training view from the steps while densifying, and end "
            "densification when their error rises (0: off, 3DGS's densification).", minimum=0,
        flag="--validation-every-nth")
    validation_interval: int = option(
        100, "Steps between the withheld views' evaluations while densifying.", minimum=1)
    validation_tolerance: float = option(
        0.02, "Densification ends when the withheld views' L1 is this fraction above its lowest "
              "since the last opacity reset.", minimum=0.0)
    validation_patience: int = option(
        1, "Consecutive evaluations above the tolerance that end densification; a round whose "
           "evaluation is above it grows nothing.", minimum=1)


_DECLARED = {f.name: f for f in dataclasses.fields(SplitClonePruneOptions)}


def shared_option(name: str, default: Any = dataclasses.MISSING, **changes) -> Any:
    """The field of shared option ``name`` for a strategy's ``Config`` (declared under the same
    name): its declared default, help and range, with this strategy's own ``default`` and
    ``changes`` to its :class:`~wgsl_splat.options.Option` (its flag; a help of its own)."""
    declared = _DECLARED[name]
    opt = dataclasses.replace(declared.metadata["option"], **changes)
    return dataclasses.field(default=declared.default if default is dataclasses.MISSING else default,
                             metadata={"option": opt, "shared": name})


def after_first_reset(config, iteration: int) -> bool:
    """Whether step ``iteration`` comes after the first opacity reset: the size pruning waits
    for it (3DGS)."""
    return iteration > config.opacity_reset_every


def opacity_reset(config, ctx, iteration: int, state: TrainState, validation) -> list[str]:
    """3DGS's opacity reset while densifying: every ``opacity_reset_every`` steps before the last
    densification step (``validation.stop``: the configured ``stop`` or where the growth
    validation ended it), and at the first densification step with a white background
    (``white_background_reset``); the validation's comparison restarts after it. Returns its log
    line."""
    c, it = config, iteration
    white_reset = c.white_background_reset and ctx.white_background and it == c.start
    if it < validation.stop and (it % c.opacity_reset_every == 0 or white_reset):
        state.reset_opacity(c.reset_opacity)
        validation.after_reset()
        return [f"step {it}: opacity reset to ≤ {c.reset_opacity}"]
    return []


@dataclass(frozen=True)
class SplitCloneRound:
    """A round's shared thresholds, in absolute units: a row may grow when its mean NDC gradient
    reaches ``grad_threshold``; it is cloned when its largest scale is at most
    ``clone_max_scale``, else split into ``split_samples`` with scales divided by
    ``split_scale_div``; the rows less opaque than ``min_opacity`` or with a largest scale above
    ``max_world_scale`` (None: off) are pruned. A strategy's round adds its own fields."""

    grad_threshold: float
    clone_max_scale: float
    split_samples: int
    split_scale_div: float
    min_opacity: float
    max_world_scale: float | None

    @staticmethod
    def shared_fields(config, ctx, iteration: int) -> dict:
        """The shared fields of the round at ``iteration`` from a section's options (scales × the
        scene's extent; the world-size pruning after the first reset) and its random ``key``."""
        c = config
        return dict(
            grad_threshold=c.grad_threshold, clone_max_scale=c.percent_dense * ctx.extent,
            split_samples=c.split_samples, split_scale_div=c.split_scale_div,
            min_opacity=c.min_opacity,
            max_world_scale=c.max_world_scale * ctx.extent if after_first_reset(c, iteration)
            else None,
            key=stream(ctx.seed, iteration, STREAM_SPLIT))

    def shared_params(self) -> dict:
        """The ``DecisionParams`` fields of ``split_clone_prune.wgsl``: the gradient threshold
        ``grad``, clone up to ``log_clone`` of the largest scale, prune below ``logit_min`` opacity
        and above ``log_world`` scale, split into ``samples`` with scales divided by
        ``exp(log_div)``; a threshold that is off is ±OFF."""
        f32 = np.float32
        return dict(
            grad=f32(self.grad_threshold),
            log_clone=f32(math.log(self.clone_max_scale)) if self.clone_max_scale > 0 else -OFF,
            logit_min=f32(inverse_sigmoid(self.min_opacity)),
            log_world=f32(math.log(self.max_world_scale)) if self.max_world_scale else OFF,
            log_div=f32(math.log(self.split_scale_div)),
            samples=self.split_samples)


class SplitCloneDecision(RowDecision):
    """A decision over a :class:`SplitCloneRound` (its WGSL declares the shared fields with
    ``#include "split_clone_prune.wgsl"`` in its ``DecisionParams``): the split the state applies
    is the round's, and the NumPy twin compares with the same float32 values as the kernel."""

    def __init__(self, rnd) -> None:
        self.rnd = rnd
        self.split_samples = rnd.split_samples
        self.split_scale_div = rnd.split_scale_div
        self.key = rnd.key

    @staticmethod
    def max_log_scale(a: HostArrays) -> np.ndarray:
        """Each row's largest log-scale, float32 (``max(max(ls.x, ls.y), ls.z)`` in the kernel)."""
        ls = a.model.log_scales.astype(np.float32)
        return ls.max(axis=1) if len(ls) else np.zeros(0, np.float32)
