"""The per-Gaussian training state and the row operations densification is written in.

A run's state is, per Gaussian: the parameters (:class:`~wgsl_splat.model.GaussianModel`), the two
Adam moments (same shapes) and the statistics the strategy asks the backward pass for (ADC:
``grad_accum``, ``denom``, ``max_radii``; MCMC: none). The NumPy path keeps them as host arrays
(:class:`wgsl_splat.reference.state.HostState`); the GPU path keeps them on the device in a layout
sized by a capacity that grows geometrically (:class:`wgsl_splat.gpu.state.DeviceState`) and edits
them with kernels, reading back only counts.

Every edit is one **row table** applied to all per-Gaussian arrays at once: output row ``r`` is
made from source row ``src[r]`` with a transform ``kind[r]``:

- ``KEEP``      the row as it is, moments and statistics included (prune = keep the others);
- ``NEW``       a copy of the parameters with zero moments and statistics (3DGS clone);
- ``SPLIT``     ``NEW`` with the mean drawn from the source Gaussian (``mean + R·(s ⊙ z)``, ``z``
                standard normal, counter-based so both paths draw the same) and the scales divided
                by ``split_scale_div`` (3DGS split; ``sample[r]`` numbers the draws of one source);
- ``RELOCATE``  ``NEW`` with the opacity and scales replaced by the MCMC relocation of its source
                (``relocated[src]``: new opacity logit and log-scale shift, per source).

The strategies (:mod:`wgsl_splat.strategy`) only decide the table — ADC's clone/split/prune, MCMC's
relocation and growth — and the state applies it; per-group resets (opacity reset) are the one
other operation. Both backends implement the same table semantics and are tested against each
other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..model import GaussianModel
from .optim import AdamState

KEEP, NEW, SPLIT, RELOCATE = 0, 1, 2, 3
ADC_STATS = ("grad_accum", "denom", "max_radii")


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
    def fresh(model: GaussianModel, stat_names=()) -> "HostArrays":
        """Zero moments and statistics for ``model``."""
        return HostArrays(model, AdamState.zeros_for(model),
                          {k: np.zeros(len(model), np.float32) for k in stat_names})

    @staticmethod
    def of(model: "GaussianModel | HostArrays", adam: AdamState | None = None) -> "HostArrays":
        """What a step is built from: the whole state as it is, or a model (float32) with ``adam``
        or fresh moments and ADC's statistics."""
        if isinstance(model, HostArrays):
            return model
        arrays = HostArrays.fresh(model.astype(np.float32), ADC_STATS)
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
    MCMC relocation of each source (``(N, 2)``: new opacity logit, log-scale shift)."""

    split_scale_div: float = 1.6
    key: int = 0
    relocated: np.ndarray | None = None


@dataclass(frozen=True)
class ADCRound:
    """One adaptive-density-control round, in absolute units (3DGS ``densify_and_prune``).

    Grow where the mean NDC gradient reaches ``grad_threshold``: clone when the largest scale is at
    most ``clone_max_scale`` (percent_dense × extent), else split into ``split_samples``; then prune
    (the grown model, by each row's source) opacity < ``min_opacity``, largest scale above
    ``max_world_scale`` (None: off) and, for rows that existed, screen radius above
    ``max_screen_size`` (0: off). At most ``room`` rows may be added: when more qualify, the
    strongest gradients go first."""

    grad_threshold: float
    clone_max_scale: float
    split_samples: int
    split_scale_div: float
    min_opacity: float
    max_world_scale: float | None
    max_screen_size: float
    room: int
    key: int


@dataclass
class DensifyReport:
    cloned: int   # Gaussians duplicated
    split: int    # Gaussians replaced by split_samples samples each
    pruned: int   # Gaussians removed for opacity or size (split originals not counted)
    before: int
    after: int
    seen: int          # Gaussians visible in at least one view since the last round
    max_grad: float    # the largest mean NDC gradient among them
    capped: bool = False   # the room left out some of the Gaussians that qualified

    def line(self) -> str:
        return (f"densify: N {self.before} -> {self.after} (+{self.cloned} cloned, {self.split} split, "
                f"-{self.pruned} pruned; {self.seen} seen, max grad {self.max_grad:.2e})"
                + ("; capped" if self.capped else ""))


class TrainState(ABC):
    """A run's per-Gaussian arrays on one path, with the row operations (module doc).

    :attr:`rows_version` counts the edits that changed the set of rows (anything but the opacity
    reset): what depends on the set (the antialiased mode's 3D filter) is recomputed after one."""

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
    def reset_opacity(self, value: float) -> None:
        """opacity ← min(opacity, value) and its Adam moments zeroed (3DGS ``reset_opacity``); in
        the antialiased mode the cap applies to the opacity as rendered (with the 3D filter's
        compensation), as Mip-Splatting does."""

    # -- strategy operations: decide a table where the data lives, then apply it -------------------
    @abstractmethod
    def densify_adc(self, rnd: ADCRound) -> DensifyReport:
        """One ADC round (clone, split, prune) in 3DGS's order: kept originals, kept clones, kept
        split samples (sample-major); statistics zeroed afterwards."""

    @abstractmethod
    def relocate(self, min_opacity: float, key: int) -> int:
        """MCMC: move every Gaussian with opacity <= ``min_opacity`` onto a live one drawn in
        proportion to opacity; returns how many moved."""

    @abstractmethod
    def add_by_opacity(self, count: int, min_opacity: float, key: int) -> int:
        """MCMC: append ``count`` Gaussians, each relocated from a source drawn in proportion to
        opacity; returns how many were added."""

    @abstractmethod
    def perturb_means(self, scale: float, key: int) -> None:
        """MCMC: means += Σ·z·σ(100·(1 − o − 0.995))·scale, z standard normal (the paper's noise)."""
