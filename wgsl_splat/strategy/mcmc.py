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

from ..reference.rows import STREAM_ADD, STREAM_RELOCATE, stream
from ..training.state import TrainState
from .base import Regularizers, Strategy, StrategyError


@dataclass
class MCMCConfig:
    """3DGS-MCMC defaults of gsplat (``MCMCStrategy`` and simple_trainer's ``mcmc`` config)."""

    cap_max: int = 1_000_000          # the number of Gaussians the run grows to
    noise_lr: float = 5e5             # position noise = noise_lr × means lr × ...
    start: int = 500                  # relocate and grow from this step ...
    stop: int = 25_000                # ... until this step
    every: int = 100
    min_opacity: float = 0.005        # dead below this
    growth: float = 0.05              # 5 % more Gaussians per round, up to cap_max
    opacity_reg: float = 0.01
    scale_reg: float = 0.01
    init_opacity: float = 0.5
    init_scale: float = 1.0           # × the k-NN scale (gsplat: 0.1; see the module doc)


class MCMC(Strategy):
    name = "mcmc"

    def __init__(self, config: MCMCConfig, ctx) -> None:
        super().__init__(config, ctx)
        if config.cap_max < 1:
            raise StrategyError(f"--cap-max must be positive, got {config.cap_max}")

    @property
    def cap(self) -> int:
        limit = self.ctx.max_gaussians
        return self.config.cap_max if limit is None else min(limit, self.config.cap_max)

    @property
    def regularizers(self) -> Regularizers:
        return Regularizers(self.config.opacity_reg, self.config.scale_reg)

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

    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        c, it = self.config, iteration
        if not (c.start < it < c.stop and it % c.every == 0):
            return []
        seed = self.ctx.seed
        moved = state.relocate(c.min_opacity, stream(seed, it, STREAM_RELOCATE))
        n = state.n
        target = min(self.cap, int((1.0 + c.growth) * n))
        added = state.add_by_opacity(max(0, target - n), c.min_opacity,
                                     stream(seed, it, STREAM_ADD))
        return [f"step {it}: mcmc: relocated {moved}, added {added}, N {state.n}"]
