"""The per-Gaussian training state and the strategy-neutral row operations strategies compose
(after gsplat's ``strategy/ops.py``).

A run's state is, per Gaussian: the parameters (:class:`~wgsl_splat.model.GaussianModel`), the two
Adam moments (same shapes) and the statistics its strategy declared
(:mod:`wgsl_splat.contract.statistics`). The NumPy path keeps them as host arrays
(:class:`wgsl_splat.reference.state.HostState`); the GPU path keeps them on the device in a layout
sized by a capacity that grows geometrically (:class:`wgsl_splat.gpu.state.DeviceState`) and edits
them with kernels, reading back only counts.

Every edit of the set of rows is one **row table** applied to all per-Gaussian arrays at once:
output row ``r`` is made from source row ``src[r]`` with a transform ``kind[r]`` (:class:`RowKind`):

- ``KEEP``      the row as it is, moments and statistics included (prune = keep the others);
- ``NEW``       a copy of the parameters with zero moments and statistics (a clone);
- ``SPLIT``     ``NEW`` with the mean drawn from the source Gaussian (``mean + R·(s ⊙ z)``, ``z``
                standard normal, counter-based so both paths draw the same) and the scales divided
                by ``split_scale_div`` (``sample[r]`` numbers the draws of one source);
- ``RELOCATE``  ``NEW`` with the opacity and scales replaced by the 3DGS-MCMC relocation of its
                source (``relocated[src]``: new opacity logit and log-scale shift, per source).

The strategy-neutral operations (:class:`TrainState`), each implemented by both paths and tested
against each other:

- :meth:`~TrainState.apply` a table given on the host;
- :meth:`~TrainState.grow` with a strategy's :class:`RowDecision`: its kernel (WGSL on the device,
  a NumPy twin on the host) says per row whether it stays, is cloned, or is split; rows compete
  for the room by the decision's score; the state builds the table (kept rows, clones, split
  samples sample-major) and applies it;
- :meth:`~TrainState.reset_opacity` (a group reset with its moments), :meth:`~TrainState.read_stats`
  and :meth:`~TrainState.clear_stats` (the statistics to the host, and back to zero).

An operation only one strategy uses is not part of this contract: the strategy declares it (a
state extension, e.g. 3DGS-MCMC's relocation in :mod:`wgsl_splat.strategy.mcmc`), and the states
of the paths implement it where their arrays live.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar, NamedTuple

import numpy as np

from ..model import GaussianModel
from .optim import AdamState
from .statistics import STANDARD, resolve


class RowKind(IntEnum):
    """The transforms of a row table (module doc); the WGSL gets them from :func:`row_kinds_wgsl`."""

    KEEP = 0
    NEW = 1
    SPLIT = 2
    RELOCATE = 3


KEEP, NEW, SPLIT, RELOCATE = RowKind
MAX_SPLIT_SAMPLES = 4          # split draws are numbered src·4 + j


def row_kinds_wgsl() -> str:
    """The row kinds and the split numbering as WGSL constants (the generated ``row_kinds.wgsl``)."""
    lines = ["// Generated from wgsl_splat/contract/state.py (RowKind); not a file on disk."]
    lines += [f"const {k.name}: u32 = {int(k)}u;" for k in RowKind]
    lines.append(f"const SPLIT_DRAWS: u32 = {MAX_SPLIT_SAMPLES}u;")
    return "\n".join(lines) + "\n"


@dataclass
class HostArrays:
    """Everything per Gaussian, on the host: what checkpoints hold and resumes upload."""

    model: GaussianModel
    adam: AdamState
    stats: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.model)
        if len(self.adam) != n or any(len(v) != n for v in self.stats.values()):
            raise ValueError(f"sizes differ: model {n}, adam {len(self.adam)}, "
                             f"stats {({k: len(v) for k, v in self.stats.items()})}")

    def __len__(self) -> int:
        return len(self.model)

    @staticmethod
    def fresh(model: GaussianModel, statistics=()) -> "HostArrays":
        """Zero moments and statistics (declarations or names) for ``model``."""
        return HostArrays(model, AdamState.zeros_for(model),
                          {s.name: np.zeros(len(model), np.float32) for s in resolve(statistics)})

    @staticmethod
    def of(model: "GaussianModel | HostArrays", adam: AdamState | None = None,
           statistics=None) -> "HostArrays":
        """What a step is built from: the whole state as it is, or a model (float32) with ``adam``
        or fresh moments, and zero ``statistics`` (None: 3DGS's, :data:`STANDARD`)."""
        if isinstance(model, HostArrays):
            return model
        arrays = HostArrays.fresh(model.astype(np.float32),
                                  STANDARD if statistics is None else statistics)
        if adam is not None:
            arrays.adam = adam
        return arrays


@dataclass
class RowTable:
    """Output row ``r`` = transform ``kind[r]`` of source row ``src[r]`` (see the module doc)."""

    src: np.ndarray
    kind: np.ndarray
    sample: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.src = np.asarray(self.src, np.int64)
        self.kind = np.broadcast_to(np.asarray(self.kind, np.uint32), self.src.shape).copy()
        self.sample = (np.zeros(len(self.src), np.uint32) if self.sample is None
                       else np.broadcast_to(np.asarray(self.sample, np.uint32), self.src.shape).copy())

    def __len__(self) -> int:
        return len(self.src)


@dataclass
class RowEdit:
    """What a table needs besides itself: the split's scale divisor and random stream, and the
    3DGS-MCMC relocation of each source (``(N, 2)``: new opacity logit, log-scale shift)."""

    split_scale_div: float = 1.6
    key: int = 0
    relocated: np.ndarray | None = None


class Decided(NamedTuple):
    """A decision's per-row outcome on the host (:meth:`RowDecision.numpy`): whether the row stays
    (``keep``), gets a clone (``clone``) or is replaced by ``split_samples`` samples (``split``);
    ``cost``, the rows it would add if allowed to grow (``int``); ``counts`` ``(N, 3)`` and
    ``peak`` ``(N,)`` the decision's own tallies (summed; the largest non-negative value)."""

    keep: np.ndarray
    clone: np.ndarray
    split: np.ndarray
    cost: np.ndarray
    counts: np.ndarray
    peak: np.ndarray


class RowDecision(ABC):
    """A strategy's per-row decision for :meth:`TrainState.grow`, in both languages.

    ``wgsl``: the device kernel's source — a ``struct DecisionParams`` (the uniform the host fills
    from :meth:`params`, field by field) and ``fn decide(i: u32, may_grow: bool) -> Decision``
    reading the row through ``log_scales(i)``, ``opacity_logit(i)``, ``mean(i)``, ``quat(i)``
    and ``stat_<name>(i)`` for each statistic of the state (``gpu/shaders/grow.wgsl``).
    :meth:`numpy` is its twin on :class:`HostArrays`, deciding from the same float32 values with
    the same comparisons, so both paths decide alike. ``may_grow`` is false for rows the room
    leaves out: they may stay or go, not grow. When the room binds, rows are ranked by
    :meth:`score` (:func:`budget`). By default the rank is one statistic's positive part
    (``rank_stat``, also one of ``score_stats``) or, without one, the same for all rows: the
    device path then ranks the rows itself (``gpu/shaders/rank.wgsl``, nothing read back). A
    decision without a ``rank_stat`` that overrides :meth:`score` is ranked on the host on both
    paths, from the statistics named in ``score_stats`` (the device path reads them back then).
    Either way the ranking is the same on any hardware.
    """

    wgsl: ClassVar[str]
    score_stats: ClassVar[tuple[str, ...]] = ()
    rank_stat: ClassVar[str | None] = None
    split_samples: int = 2
    split_scale_div: float = 1.6
    key: int = 0

    def score(self, stats: dict[str, np.ndarray]) -> np.ndarray:
        """Each row's rank when the room binds (larger grows first): ``rank_stat``'s positive
        part (a float32 value above zero, else zero: what the device ranks by), or all rows alike
        without one; equal ranks grow lower indices first. ``stats`` holds ``score_stats``."""
        if self.rank_stat is None:
            n = len(next(iter(stats.values()))) if stats else 0
            return np.zeros(n)
        v = np.asarray(stats[self.rank_stat], np.float32)
        return np.where(v > 0, v, np.float32(0)).astype(np.float64)

    @property
    def ranked_on_device(self) -> bool:
        """Whether the rank is :meth:`RowDecision.score`'s (``rank_stat``, or all rows alike),
        which the device path computes by itself."""
        return self.rank_stat is not None or type(self).score is RowDecision.score

    @abstractmethod
    def params(self) -> dict[str, float | int]:
        """The values of ``DecisionParams``, by field name."""

    @abstractmethod
    def numpy(self, arrays: HostArrays, may_grow: np.ndarray) -> Decided:
        """The decision for every row of ``arrays`` (``may_grow``: bool per row)."""


_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$')


def wgsl_beside(module_file: str, name: str) -> str:
    """The text of WGSL file ``name`` in the folder of the module ``module_file`` (``__file__``):
    a strategy's kernels live next to it and ship with it as package data. An ``#include`` of
    another file of that folder is replaced by its text (what strategies share, e.g. uniform
    fields); other includes are left to the shader loader."""
    folder = os.path.dirname(os.path.abspath(module_file))
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    for j, line in enumerate(lines):
        m = _INCLUDE.match(line)
        if m and os.path.isfile(os.path.join(folder, m.group(1))):
            text = wgsl_beside(module_file, m.group(1))
            lines[j] = text if text.endswith("\n") else text + "\n"
    return "".join(lines)


@dataclass
class GrowReport:
    """What :meth:`TrainState.grow` did: rows before and after, rows kept as they were, clones and
    split sources added (after the decision's own pruning), the decision's tallies, and whether
    the room left some rows out."""

    before: int
    after: int
    kept: int
    cloned: int
    split: int
    counts: tuple[int, int, int]
    peak: float
    capped: bool


class TrainState(ABC):
    """A run's per-Gaussian arrays on one path, with the row operations (module doc).

    :attr:`rows_version` counts the edits that changed the set of rows (anything but the opacity
    reset and the noise): what depends on the set (the antialiased mode's 3D filter) is
    recomputed after one."""

    stat_names: tuple[str, ...]
    rows_version: int = 0

    @property
    @abstractmethod
    def n(self) -> int:
        """Current number of Gaussians (known on the host without a read-back)."""

    @abstractmethod
    def download(self) -> HostArrays:
        """A host copy of everything (checkpoints, tests)."""

    @abstractmethod
    def upload(self, arrays: HostArrays) -> None:
        """Replace everything (resume, tests)."""

    @abstractmethod
    def apply(self, table: RowTable, edit: RowEdit | None = None) -> None:
        """Rebuild every per-Gaussian array from ``table`` (given on the host)."""

    @abstractmethod
    def grow(self, decision: RowDecision, room: int) -> GrowReport:
        """Decide every row with ``decision`` and rebuild the arrays: kept rows (in order), clones,
        then the split samples sample-major. When the rows that want to grow would add more than
        ``room`` rows, only the highest scores (ties: the lower index) grow, as many as fit."""

    @abstractmethod
    def reset_opacity(self, value: float) -> None:
        """opacity ← min(opacity, value) and its Adam moments zeroed (3DGS ``reset_opacity``); in
        the antialiased mode the cap applies to the opacity as rendered (with the 3D filter's
        compensation), as Mip-Splatting does."""

    @abstractmethod
    def read_stats(self) -> dict[str, np.ndarray]:
        """The statistics on the host, by name."""

    @abstractmethod
    def clear_stats(self) -> None:
        """Every statistic back to zero."""


def budget(score: np.ndarray, cost: np.ndarray, room: int) -> np.ndarray:
    """The rows that may grow when ``cost`` exceeds ``room``: highest ``score`` first (ties: lower
    index), as long as the running total of their costs fits."""
    order = np.argsort(-np.asarray(score), kind="stable")
    allowed = np.zeros(len(score), bool)
    allowed[order[np.cumsum(np.asarray(cost, np.int64)[order]) <= room]] = True
    return allowed
