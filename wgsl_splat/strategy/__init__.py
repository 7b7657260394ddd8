"""Densification strategies: ``adc`` (3DGS adaptive density control) and ``mcmc`` (3DGS-MCMC).

See :mod:`wgsl_splat.strategy.base` for what a strategy is to the trainer."""

from __future__ import annotations

from .adc import ADC, ADCConfig
from .base import Regularizers, Strategy, StrategyContext, StrategyError
from .mcmc import MCMC, MCMCConfig

STRATEGIES = {"adc": ADC, "mcmc": MCMC}

__all__ = ["ADC", "ADCConfig", "MCMC", "MCMCConfig", "Regularizers", "STRATEGIES", "Strategy",
           "StrategyContext", "StrategyError", "make_strategy"]


def make_strategy(cfg, ctx: StrategyContext) -> Strategy:
    """The strategy ``cfg.strategy`` names, with its own section of the configuration."""
    if cfg.strategy not in STRATEGIES:
        raise StrategyError(f"unknown strategy {cfg.strategy!r}; choose from "
                            f"{', '.join(STRATEGIES)}")
    return STRATEGIES[cfg.strategy](getattr(cfg, cfg.strategy), ctx)
