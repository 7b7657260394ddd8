"""Per-Gaussian statistics that the backward pass accumulates for a strategy, declared once.

A :class:`Statistic` is a named accumulator over the training views in which a Gaussian is visible
(radius > 0): the sum or the maximum of an **observable** of that view. An :class:`Observable` has
both of its parts here — the NumPy function the reference step evaluates and the WGSL expression
the device step's projection backward evaluates (``project_backward.wgsl`` includes the code
:func:`statistics_wgsl` generates from the strategy's list) — so the two paths accumulate the same
numbers. A strategy lists the statistics it needs (``Strategy.statistics``); the state keeps one
array per statistic, rebuilt by every row operation (new rows start at zero) and cleared by the
strategy when it has used them.

The three of 3DGS's adaptive density control are declared here under 3DGS's names; a strategy that
needs another declares its own :class:`Statistic` (it registers itself by name).

A statistic of the observable :data:`OBSERVED` is not accumulated by the training step: a view
observation fills it (:meth:`~wgsl_splat.contract.step.TrainStep.observe`: per Gaussian, its
blending weights α·T summed over the pixels of a view, weighted by a per-pixel map the strategy
computes from the render and the image), when the strategy asks for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

REDUCTIONS = ("sum", "max")


class ViewObservation(NamedTuple):
    """What the NumPy backward pass of one view gives an observable (all Gaussians; the step keeps
    the visible rows): the pixel-space gradient of the projected means ``(N, 2)``, the screen
    radii ``(N,)``, and the view's size."""

    means2d_grad: np.ndarray
    radii: np.ndarray
    width: int
    height: int


@dataclass(frozen=True)
class Observable:
    """A per-Gaussian quantity of one view. ``wgsl``: an expression in the scope of
    ``project_backward.wgsl``'s statistics function (``v0.xy``: dL/dmean2d in pixels, ``s``: the
    ``Splat2D``, ``half``: (W/2, H/2)); ``numpy``: the same from a :class:`ViewObservation`."""

    wgsl: str | None
    numpy: Callable[[ViewObservation], np.ndarray] | None

    @property
    def per_step(self) -> bool:
        """Accumulated by every training step (else filled by a view observation)."""
        return self.wgsl is not None


def ndc_grad_norm(dL_dmeans2d: np.ndarray, width: int, height: int) -> np.ndarray:
    """‖∂L/∂μ2D‖ in NDC units from the pixel-space gradient."""
    return np.hypot(dL_dmeans2d[:, 0] * (0.5 * width), dL_dmeans2d[:, 1] * (0.5 * height))


OBSERVABLES: dict[str, Observable] = {
    # ‖∂L/∂μ2D‖ in NDC units (pixel gradient × W/2, H/2): 3DGS's densification signal
    "screen_grad": Observable("length(v0.xy * half)",
                              lambda o: ndc_grad_norm(o.means2d_grad, o.width, o.height)),
    "visible": Observable("1.0", lambda o: np.ones(len(o.radii))),
    "radius": Observable("s.radius", lambda o: o.radii),
    # filled by TrainStep.observe, not by the step (module doc)
    "observed": Observable(None, None),
}
#: the observable of statistics that view observations fill
OBSERVED = "observed"

STATISTICS: dict[str, "Statistic"] = {}


@dataclass(frozen=True)
class Statistic:
    """``name``: the state's array (and the checkpoint's ``stats.<name>``); ``observable``: a key of
    :data:`OBSERVABLES`; ``reduce``: ``sum`` over the views, or ``max``."""

    name: str
    observable: str
    reduce: str = "sum"

    def __post_init__(self) -> None:
        if self.observable not in OBSERVABLES:
            raise ValueError(f"statistic {self.name}: unknown observable {self.observable!r}")
        if self.reduce not in REDUCTIONS:
            raise ValueError(f"statistic {self.name}: reduce must be one of {REDUCTIONS}")
        if self.observable == OBSERVED and self.reduce != "sum":
            raise ValueError(f"statistic {self.name}: observations add to a statistic (sum)")
        known = STATISTICS.setdefault(self.name, self)
        if known != self:
            raise ValueError(f"statistic {self.name!r} is declared twice, differently")


GRAD_ACCUM = Statistic("grad_accum", "screen_grad", "sum")
DENOM = Statistic("denom", "visible", "sum")


def mean_gradient(stats: dict[str, np.ndarray]) -> np.ndarray:
    """3DGS's densification score: the mean screen-space gradient per view a row was seen in
    (float64, ``grad_accum / max(denom, 1)``)."""
    return stats["grad_accum"].astype(np.float64) / np.maximum(stats["denom"], 1.0)
MAX_RADII = Statistic("max_radii", "radius", "max")
#: 3DGS's densification statistics: what a step built from a bare model accumulates
STANDARD = (GRAD_ACCUM, DENOM, MAX_RADII)


def resolve(statistics) -> tuple[Statistic, ...]:
    """Statistics given as declarations or names (names of declared statistics)."""
    out = []
    for s in statistics:
        if isinstance(s, Statistic):
            out.append(s)
        elif s in STATISTICS:
            out.append(STATISTICS[s])
        else:
            raise KeyError(f"unknown statistic {s!r}; declared: {', '.join(STATISTICS)}")
    return tuple(out)


def accumulate_numpy(stats: dict[str, np.ndarray], statistics, obs: ViewObservation,
                     visible: np.ndarray) -> None:
    """Add one view's observables to the statistics (in place), for the visible rows."""
    for s in statistics:
        if not OBSERVABLES[s.observable].per_step:
            continue
        value = OBSERVABLES[s.observable].numpy(obs)[visible]
        arr = stats[s.name]
        if s.reduce == "sum":
            arr[visible] += value
        else:
            arr[visible] = np.maximum(arr[visible], value)


def statistics_wgsl(statistics) -> str:
    """``accumulate_statistics(i, n, v0, s, half)`` for ``project_backward.wgsl``: statistic j lives
    at ``stats[j·n + i]``, in the order given."""
    lines = ["// Generated from the strategy's statistics (wgsl_splat/contract/statistics.py).",
             "fn accumulate_statistics(i: u32, n: u32, v0: vec4<f32>, s: Splat2D, half: vec2<f32>) {"]
    for j, stat in enumerate(statistics):
        expr = OBSERVABLES[stat.observable].wgsl
        if expr is None:      # filled by view observations
            continue
        slot = f"stats[{j}u * n + i]"
        combined = f"{slot} + ({expr})" if stat.reduce == "sum" else f"max({slot}, {expr})"
        lines.append(f"    {slot} = {combined};   // {stat.name}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def accessors_wgsl(statistics, buffer: str = "stats", count: str = "n_rows()") -> str:
    """``stat_<name>(i)`` accessors for a strategy's decision kernel."""
    return "".join(f"fn stat_{s.name}(i: u32) -> f32 {{\n    return {buffer}[{j}u * {count} + i];\n}}\n"
                   for j, s in enumerate(statistics))


def reduction_layout(statistics) -> tuple[tuple[Statistic, ...], tuple[Statistic, ...]]:
    """How replicas reduce the statistics (:mod:`wgsl_splat.training.parallel`): the summed ones
    after the gradients, the maxed ones apart, each in the state's order."""
    stats = tuple(statistics)
    return (tuple(s for s in stats if s.reduce == "sum"),
            tuple(s for s in stats if s.reduce == "max"))
