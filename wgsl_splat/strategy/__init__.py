"""Densification strategies: what a strategy is (:mod:`.base`), the strategy-neutral row operations
it composes (:class:`~wgsl_splat.contract.state.TrainState`), and the strategies themselves, one
module each (with its WGSL beside it): ``adc`` (3DGS adaptive density control, the reference),
``mcmc`` (3DGS-MCMC, with the state operations only it uses) and ``fast`` (a budget, growth where
the views see error). ADC and the fast strategy share one split/clone/prune section
(:mod:`.split_clone_prune`: options, round, uniform fields, opacity reset).

Every module of this package is imported here, so a strategy module registers itself
(:func:`register_strategy`): adding a strategy is adding its file."""

from __future__ import annotations

import importlib
import pkgutil

from .base import (
    STRATEGIES,
    Strategy,
    StrategyContext,
    StrategyError,
    make_strategy,
    register_strategy,
    strategy_names,
)

for _info in pkgutil.iter_modules(__path__):
    if _info.name != "base":
        importlib.import_module(f"{__name__}.{_info.name}")

from .adc import ADC, ADCConfig  # noqa: E402
from .mcmc import MCMC, MCMCConfig  # noqa: E402

__all__ = ["ADC", "ADCConfig", "MCMC", "MCMCConfig", "STRATEGIES", "Strategy", "StrategyContext",
           "StrategyError", "make_strategy", "register_strategy", "strategy_names"]
