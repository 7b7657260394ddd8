"""Growth validated on withheld training views, for the strategies that densify (ADC, fast).

Every ``validation_every_nth`` training view is withheld from the steps and from the growth's
observations while the strategy densifies. Every ``validation_interval`` steps, before a round
grows, their mean L1 (the loss's L1 term) is measured. A round whose error is more than
``validation_tolerance`` above its lowest since the last opacity reset (a reset raises every view's
error for a while) grows nothing; at ``validation_patience`` such rounds in a row, densification
ends at that step as it would at ``stop``: no more rounds or resets, and the withheld views train
from then on. Gaussians beyond what the views constrain fit the training views at the others'
expense (mouse's fog, docs/benchmarks.md); only views the growth has not seen show it. A patience
above 1 lets one rise pass as noise (fox's falling error moves 2–3 % from check to check); it is 1
by default, as no scene measured has gained from more (docs/benchmarks.md). The test views are
never used.

The options are declared with the shared split/clone/prune options
(:class:`~wgsl_splat.strategy.split_clone_prune.SplitClonePruneOptions`); a strategy keeps one
:class:`GrowthValidation` and asks it for its last densification step (:attr:`stop`).
"""

from __future__ import annotations

import numpy as np


class GrowthValidation:
    """The withheld views, their lowest error so far and the step that ended densification."""

    def __init__(self, config, ctx) -> None:
        self.config = config
        self.ctx = ctx
        self.best: float | None = None         # the withheld views' lowest L1 since the last reset
        self.rises = 0                         # checks above the tolerance in a row
        self.held_at: int | None = None        # the last check above it that did not end growth
        self.stopped_at: int | None = None     # the check that ended densification

    @property
    def stop(self) -> int:
        """The last densification step: the configured ``stop``, or the step the validation ended
        densification at."""
        c = self.config
        return c.stop if self.stopped_at is None else min(c.stop, self.stopped_at)

    def ids(self) -> list[int]:
        """Every ``validation_every_nth`` training view (none when off, with too few views, or
        when the run ends before densification does: the views would never be trained)."""
        n, views, iters = self.config.validation_every_nth, self.ctx.views, self.ctx.iters
        if not n or views is None or (iters is not None and iters <= self.config.stop):
            return []
        ids = sorted(views.ids)
        return ids[n // 2::n] if len(ids) >= n else []

    def withheld(self, iteration: int) -> frozenset[int]:
        return frozenset(self.ids()) if iteration < self.stop else frozenset()

    def after_reset(self) -> None:
        """An opacity reset: the errors before it are no measure of the model after it."""
        self.best = None
        self.rises = 0

    def check(self, iteration: int, n: int, name: str) -> list[str]:
        """At a round on the interval, before it grows: the withheld views' L1 (log lines of
        strategy ``name``). More than ``validation_tolerance`` above its lowest, the round is held
        (:meth:`skips`); at the ``validation_patience``-th such check in a row densification ends
        here (:attr:`stopped_at`)."""
        c = self.config
        ids = self.ids()
        if not ids or iteration % c.validation_interval or iteration >= self.stop:
            return []
        err = float(np.mean(self.ctx.views.errors(ids, iteration)))
        best = self.best
        line = f"step {iteration}: {name}: the {len(ids)} withheld views' L1 {err:.5f}"
        if best is not None and err > best * (1.0 + c.validation_tolerance):
            self.rises += 1
            line += f" is {err / best - 1:.1%} above its lowest {best:.5f}"
            if self.rises >= c.validation_patience:
                self.stopped_at = iteration
                return [f"{line}: densification ends at N {n}"]
            self.held_at = iteration
            return [f"{line} ({self.rises} of {c.validation_patience} in a row): the round "
                    f"grows nothing"]
        self.rises = 0
        self.best = err if best is None else min(best, err)
        return [line]

    def ended(self, iteration: int) -> bool:
        """Whether densification ended at or before the check at ``iteration``."""
        return self.stopped_at is not None and iteration >= self.stopped_at

    def skips(self, iteration: int) -> bool:
        """Whether the round at ``iteration`` is not run: its check held it or ended growth."""
        return self.ended(iteration) or self.held_at == iteration

    def state_dict(self) -> dict:
        return dict(validation_best=self.best, validation_rises=self.rises,
                    validation_stopped_at=self.stopped_at)

    def load_state_dict(self, state: dict) -> None:
        best, stopped = state.get("validation_best"), state.get("validation_stopped_at")
        if stopped is None and state.get("frozen_n") is not None:
            stopped = 0   # a run of 2026-11-28 whose growth had stopped: densification is over
        self.best = None if best is None else float(best)
        self.rises = int(state.get("validation_rises", 0))
        self.stopped_at = None if stopped is None else int(stopped)
