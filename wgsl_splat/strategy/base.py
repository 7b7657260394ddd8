"""What a densification strategy is to the trainer (after gsplat's ``strategy/base.py``).

The trainer's loop is: pick a view → step → :meth:`Strategy.after_step` → log/eval/save. A
strategy owns its configuration and schedule, says which statistics the backward pass must
accumulate (:attr:`Strategy.statistics`), which loss terms it trains with and whether the step
perturbs the means, and edits the training state only through its row operations
(:class:`wgsl_splat.contract.state.TrainState`), which run where the state lives (NumPy or the device).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

from ..contract.state import TrainState


class StrategyError(ValueError):
    """A strategy's configuration does not fit the run (one line, for the user)."""


#: name -> strategy class, filled by :func:`register_strategy`
STRATEGIES: dict[str, type["Strategy"]] = {}


def register_strategy(cls: type["Strategy"]) -> type["Strategy"]:
    """Make ``cls`` a strategy of ``train --strategy`` (a class decorator); its ``Config`` becomes a
    section of the training configuration named after it."""
    if not cls.name or cls.name in STRATEGIES and STRATEGIES[cls.name] is not cls:
        raise ValueError(f"strategy name {cls.name!r} is empty or taken")
    STRATEGIES[cls.name] = cls
    return cls


def periodic_round(config, iteration: int, at_stop: bool = False,
                   stop: int | None = None) -> bool:
    """A round every ``config.every`` steps after ``config.start`` and before ``stop`` (default
    ``config.stop``; ``at_stop``: at it too) — the schedule of the densifying strategies'
    ``round_due``."""
    c, it = config, iteration
    stop = c.stop if stop is None else stop
    return c.start < it and (it <= stop if at_stop else it < stop) and it % c.every == 0


def strategy_names() -> tuple[str, ...]:
    return tuple(STRATEGIES)


def make_strategy(cfg, ctx: "StrategyContext") -> "Strategy":
    """The strategy ``cfg.strategy`` names, with its own section of the configuration."""
    if cfg.strategy not in STRATEGIES:
        raise StrategyError(f"unknown strategy {cfg.strategy!r}; choose from "
                            f"{', '.join(STRATEGIES)}")
    return STRATEGIES[cfg.strategy](cfg.strategies[cfg.strategy], ctx)


@dataclass
class StrategyContext:
    """What a strategy knows of the run."""

    extent: float                          # scene extent (3DGS cameras_extent)
    white_background: bool
    seed: int
    max_gaussians: int | None = None       # the most the path can hold (adapter bindings)
    view_pixels: tuple[int, ...] = ()      # each training view's width × height
    params_per_gaussian: int = 59          # trained floats per Gaussian (59 at SH degree 3)
    iters: int | None = None               # the run's last step
    log: Callable[[str], None] = print
    #: the training views (cameras, images, observations through the step): set by the trainer
    #: once the step exists (wgsl_splat.training.views.TrainingViews)
    views: object | None = None

    #: the detail the training views show, summed (``Dataset.edge_pixels``: edge length ×
    #: contrast in pixels), measured on views reduced to at most the given pixels (fast's budget)
    edge_pixels: Callable[[float], float] | None = None

    @property
    def observations(self) -> int | None:
        """The values the training views constrain: three colour channels per pixel."""
        return 3 * sum(self.view_pixels) if self.view_pixels else None


class Strategy(ABC):
    """``name``: its ``--strategy`` value; ``Config``: its configuration dataclass (options declared
    with :func:`wgsl_splat.options.option`); ``loss_defaults``: loss weights it trains with unless
    the user sets them (:class:`~wgsl_splat.contract.losses.LossConfig` fields)."""

    name: ClassVar[str]
    Config: ClassVar[type]
    statistics: ClassVar[tuple] = ()   # Statistic declarations (contract/statistics.py)
    loss_defaults: ClassVar[dict[str, float]] = {}
    #: preset name -> overrides of the run's configuration (dotted paths of TrainConfig, e.g.
    #: ``iters``) for runs of this strategy, applied after the preset's own
    run_presets: ClassVar[dict[str, dict]] = {}

    def __init__(self, config, ctx: StrategyContext) -> None:
        self.config = config
        self.ctx = ctx

    # -- what the step needs to know ------------------------------------------------------------
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

    def random_init_points(self, requested: int) -> int:
        """How many random points a scene without a point cloud starts from, of the
        ``random_init_points`` the run asks for."""
        return requested

    def resolution(self, iteration: int) -> int:
        """The step's training views are downscaled by this factor (1: the training resolution;
        a resolution schedule must end at 1)."""
        return 1

    @property
    def refine_stop(self) -> int:
        """The step after which the strategy no longer changes the set of Gaussians."""
        return self.config.stop

    def withheld(self, iteration: int) -> frozenset[int]:
        """Training views (dataset indices) the steps leave out at ``iteration`` (a strategy that
        validates its growth on them); none by default."""
        return frozenset()

    def round_due(self, iteration: int) -> bool:
        """Whether the hook after step ``iteration`` runs a round (reads the device's statistics
        back): the trainer waits for the queued steps first, so that their device time is not
        counted as the round's."""
        return False

    def check(self, initial_count: int) -> None:
        """Raise :class:`StrategyError` when the configuration cannot work for this start."""

    # -- the hook -------------------------------------------------------------------------------
    @abstractmethod
    def after_step(self, iteration: int, state: TrainState) -> list[str]:
        """Edit the state after step ``iteration`` (densify, prune, relocate, reset); returns the
        log lines of what it did."""

    @classmethod
    def exercise_kernels(cls, step, view) -> None:
        """Run every shader variant of the strategy's own (its decisions' grow kernels, view
        observations) once on ``step``, a tiny GPU step with the strategy's statistics, and
        ``view``: the portability tour (wgsl_splat/tools/portability.py) compiles what this
        creates for every platform."""

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
