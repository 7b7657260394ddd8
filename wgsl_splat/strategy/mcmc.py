"""3DGS-MCMC (Kheradmand et al. 2024, "3D Gaussian Splatting as Markov Chain Monte Carlo"), as
gsplat's ``MCMCStrategy`` implements it: every ``every`` steps between ``start`` and ``stop`` the
dead Gaussians (opacity ≤ ``min_opacity``) are relocated onto live ones drawn in proportion to
opacity, with the paper's opacity/scale correction so that the rendered sum is unchanged, and
``growth`` more are added the same way up to ``cap_max``; every step the means receive noise scaled
by the means' learning rate and gated to nearly transparent Gaussians; the loss carries L1
regularisers on opacity and scale. Initialised with opacity 0.5 (gsplat's ``mcmc`` configuration)
and 3DGS's k-NN scales.

Three deliberate differences from gsplat. The initial scales are the k-NN distance itself, not
gsplat's 0.1 × it: at 0.1 × the small Gaussians left holes that 300 smoke steps could not close
(mouse -r 8 at ADC's N: 13.4 dB with 0.1 ×, 21.0 with 1 ×, ADC 18.2; lavapipe, 2026-11-23). And,
both toward the paper's code: the Adam moments of the
rows that receive a relocated Gaussian are zeroed (gsplat leaves the dead row's stale moments), and
the sources of added Gaussians have their moments zeroed as in relocation (gsplat keeps them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..contract.rows import STREAM_ADD, STREAM_RELOCATE, stream
from ..contract.state import TrainState
from ..options import option
from .base import Strategy, StrategyError, periodic_round, register_strategy


class MCMCState(Protocol):
    """The operations 3DGS-MCMC adds to a :class:`~wgsl_splat.contract.state.TrainState`: only
    this strategy uses them, so they extend the neutral contract here instead of being part of it.
    Both paths' states implement them where their arrays live, as row tables of the ``RELOCATE``
    kind (NumPy: ``reference/state.py`` over ``reference/rows.py``, the semantics; the device:
    ``gpu/state.py`` over ``relocation.wgsl``); the replicated state runs them on every replica as
    it runs the contract's operations. Sources are drawn in proportion to opacity with integer
    weights and counter-based draws (``key``), so both paths draw the same rows."""

    def relocate(self, min_opacity: float, key: int) -> int:
        """Move every Gaussian with opacity <= ``min_opacity`` onto a live one drawn in proportion
        to opacity, with eq. 9's opacity/scale correction; returns how many moved."""

    def sample_add(self, count: int, min_opacity: float, key: int) -> int:
        """Append ``count`` Gaussians, each relocated from a source drawn in proportion to
        opacity; returns how many were added (fewer where the device's memory binds)."""

    def perturb_means(self, scale: float, key: int) -> None:
        """means += Σ·z·σ(100·(1 − o − 0.995))·scale, z standard normal: the position noise (the
        step applies it before its update, :meth:`Strategy.noise_lr`; this is the same noise on
        its own, for tests and tools)."""


@dataclass
class MCMCConfig:
    """3DGS-MCMC defaults of gsplat (``MCMCStrategy`` and simple_trainer's ``mcmc`` config)."""

    PRESETS = {"smoke": dict(start=50, stop=250, every=50), "fast": dict(stop=6000)}

    cap_max: int = option(1_000_000, "The number of Gaussians the run grows to.", flag="--cap-max",
                          minimum=1)
    noise_lr: float = option(5e5, "Position noise, a factor on the means' learning rate.",
                             flag="--mcmc-noise-lr", minimum=0.0)
    start: int = option(500, "Relocate and grow from this step ...", minimum=0)
    stop: int = option(25_000, "... until this step.", minimum=0)
    every: int = option(100, "Steps between relocations.", minimum=1)
    min_opacity: float = option(0.005, "Gaussians less opaque than this are dead (relocated).",
                                minimum=0.0, maximum=1.0)
    growth: float = option(0.05, "Grow by this fraction per round, up to the cap.", minimum=0.0)
    init_opacity: float = option(0.5, "Initial opacity.", minimum=0.0, maximum=1.0, open_min=True)
    init_scale: float = option(1.0, "× the k-NN initial scale (gsplat: 0.1; see the module doc).",
                               minimum=0.0, open_min=True)


@register_strategy
class MCMC(Strategy):
    """3DGS-MCMC: relocate dead Gaussians, grow to --cap-max, position noise, opacity and scale
    regularisers."""

    name = "mcmc"
    Config = MCMCConfig
    #: the loss terms 3DGS-MCMC trains with (gsplat's opacity_reg and scale_reg)
    loss_defaults = {"opacity_reg": 0.01, "scale_reg": 0.01}

    @property
    def cap(self) -> int:
        limit = self.ctx.max_gaussians
        return self.config.cap_max if limit is None else min(limit, self.config.cap_max)

    @property
    def init_opacity(self) -> float:
        return self.config.init_opacity

    @property
    def init_scale(self) -> float:
        return self.config.init_scale

    def noise_lr(self, iteration: int) -> float:
        return self.config.noise_lr

    def check(self, initial_count: int) -> None:
        if self.config.cap_max < initial_count:
            raise StrategyError(f"--cap-max {self.config.cap_max} is below the {initial_count} "
                                f"Gaussians the run starts with: MCMC only grows; raise --cap-max "
                                f"or start from fewer points")

    def round_due(self, iteration: int) -> bool:
        return periodic_round(self.config, iteration)

    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        """Relocate the dead, then grow by ``growth``; ``state`` is also an :class:`MCMCState`."""
        c, it = self.config, iteration
        if not self.round_due(it):
            return []
        seed = self.ctx.seed
        moved = state.relocate(c.min_opacity, stream(seed, it, STREAM_RELOCATE))
        n = state.n
        target = min(self.cap, int((1.0 + c.growth) * n))
        added = state.sample_add(max(0, target - n), c.min_opacity,
                                     stream(seed, it, STREAM_ADD))
        return [f"step {it}: mcmc: relocated {moved}, added {added}, N {state.n}"]
