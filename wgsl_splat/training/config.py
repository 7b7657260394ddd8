"""Training configuration shared by both paths, with presets (original 3DGS defaults)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .optim import OptimConfig
from ..render_config import check_mode
from ..strategy import STRATEGIES, ADCConfig, MCMCConfig


@dataclass
class TrainConfig:
    iters: int = 30_000
    sh_degree: int = 3
    sh_increase_every: int = 1000
    lambda_dssim: float = 0.2
    batch_size: int = 1                       # views per step (optim.for_batch scales Adam)
    background: tuple = (0.0, 0.0, 0.0)
    seed: int = 0
    # steps at which test views are evaluated (the 3DGS paper's 7k and 30k, plus the early curve)
    eval_at: tuple = (1_000, 2_000, 3_000, 7_000, 15_000, 30_000)
    save_at: tuple = (7_000, 30_000)          # steps at which a PLY is written (the last always is)
    checkpoint_every: int = 1000
    log_every: int = 100
    random_init_points: int = 100_000         # when the scene has no point cloud
    lpips: bool = True                        # LPIPS-VGG at the final evaluation when installed
    render_mode: str = "classic"              # or "antialiased" (Mip-Splatting; render_config.py)
    strategy: str = "adc"                     # densification: adc (3DGS) or mcmc (3DGS-MCMC)
    adc: ADCConfig = field(default_factory=ADCConfig)
    mcmc: MCMCConfig = field(default_factory=MCMCConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def __post_init__(self) -> None:
        check_mode(self.render_mode)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "TrainConfig":
        d = dict(d)
        if "densify" in d:    # checkpoints before the strategies (format 2) called ADC's "densify"
            d.setdefault("adc", d.pop("densify"))
        # runs configured before the observation cap grew without it: resume them the same way
        d["adc"] = dict(d.get("adc", {}))
        d["adc"].setdefault("max_params_per_observation", 0.0)
        adc = ADCConfig(**d.pop("adc", {}))
        mcmc = MCMCConfig(**d.pop("mcmc", {}))
        opt = OptimConfig(**d.pop("optim", {}))
        for key in ("background", "eval_at", "save_at"):
            if key in d:
                d[key] = tuple(d[key])
        return TrainConfig(adc=adc, mcmc=mcmc, optim=opt, **d)


def preset(name: str) -> TrainConfig:
    """``default``: the original 30k-step schedule. ``smoke``: a short run with the same schedule
    compressed (densification or relocation, opacity resets and SH growth all happen) for quick
    checks. ``fast``: 7k steps as 3DGS's first evaluation point."""
    if name == "default":
        return TrainConfig()
    if name == "fast":
        cfg = TrainConfig(iters=7000, eval_at=(1000, 2000, 3000, 7000), save_at=(7000,))
        cfg.adc.stop = 6000
        cfg.mcmc.stop = 6000
        return cfg
    if name == "smoke":
        cfg = TrainConfig(iters=300, sh_increase_every=100, eval_at=(300,), save_at=(300,),
                          checkpoint_every=100, log_every=25, random_init_points=5000)
        cfg.adc = ADCConfig(start=50, stop=250, every=50, opacity_reset_every=150)
        cfg.mcmc = MCMCConfig(start=50, stop=250, every=50)
        return cfg
    raise ValueError(f"unknown preset {name!r}; choose from smoke, fast, default")


PRESETS = ("smoke", "fast", "default")
STRATEGY_NAMES = tuple(STRATEGIES)
