"""What a densification strategy is to the trainer (after gsplat's ``strategy/base.py``).

The trainer's loop is: pick a view → step → :meth:`Strategy.after_step` → log/eval/save. A
strategy owns its configuration and schedule, says which statistics the backward pass must
accumulate (:attr:`Strategy.stat_names`), which regularisers the loss carries and whether the step
perturbs the means, and edits the training state only through its row operations
(:class:`wgsl_splat.training.state.TrainState`), which run where the state lives (NumPy or the device).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

from ..training.state import TrainState
from ..training.step import Regularizers


class StrategyError(ValueError):
    """A strategy's configuration does not fit the run (one line, for the user)."""


@dataclass
class StrategyContext:
    """What a strategy knows of the run."""

    extent: float                          # scene extent (3DGS cameras_extent)
    white_background: bool
    seed: int
    max_gaussians: int | None = None       # the most the path can hold (adapter bindings)
    observations: int | None = None        # values the training views constrain: 3 × their pixels
    params_per_gaussian: int = 59          # trained floats per Gaussian (59 at SH degree 3)
    log: Callable[[str], None] = print


class Strategy(ABC):
    name: ClassVar[str]
    stat_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config, ctx: StrategyContext) -> None:
        self.config = config
        self.ctx = ctx

    # -- what the step needs to know ------------------------------------------------------------
    @property
    def regularizers(self) -> Regularizers:
        return Regularizers()

    def noise_lr(self, iteration: int) -> float:
        """Factor on the means' learning rate for this step's position noise (0: none)."""
        return 0.0

    @property
    def init_opacity(self) -> float:
        return 0.1

    @property
    def init_scale(self) -> float:
        """Factor on the k-NN initial scale."""
        return 1.0

    @property
    def refine_stop(self) -> int:
        """The step after which the strategy no longer changes the set of Gaussians."""
        return self.config.stop

    def check(self, initial_count: int) -> None:
        """Raise :class:`StrategyError` when the configuration cannot work for this start."""

    # -- the hook -------------------------------------------------------------------------------
    @abstractmethod
    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        """Edit the state after step ``iteration`` (densify, prune, relocate, reset); returns the
        log lines of what it did."""

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
