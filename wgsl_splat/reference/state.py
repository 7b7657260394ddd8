"""The NumPy path's training state: host arrays edited by :mod:`wgsl_splat.reference.rows`."""

from __future__ import annotations

import numpy as np

from ..contract.state import (
    GrowReport,
    HostArrays,
    RowDecision,
    RowEdit,
    RowTable,
    TrainState,
)
from . import rows


class HostState(TrainState):
    """Parameters (float32), Adam moments and statistics as NumPy arrays (:class:`HostArrays`)."""

    def __init__(self, arrays: HostArrays) -> None:
        self.stat_names = tuple(arrays.stats)
        self.arrays = arrays
        #: the antialiased mode's 3D filter, (N,) float32 (None: zero, or the classic mode); kept
        #: by the step, dropped when the rows change until the step recomputes it
        self.filter_3d: np.ndarray | None = None
        self.upload(arrays)

    @property
    def n(self) -> int:
        return len(self.arrays)

    def download(self) -> HostArrays:
        a = self.arrays
        return HostArrays(a.model.copy(), a.adam.copy(), {k: v.copy() for k, v in a.stats.items()})

    def upload(self, arrays: HostArrays) -> None:
        if tuple(arrays.stats) != self.stat_names:
            raise ValueError(f"statistics {tuple(arrays.stats)} given, this state keeps "
                             f"{self.stat_names}")
        # copies: the step trains its own arrays, never the caller's
        self._set(HostArrays(arrays.model.astype(np.float32).copy(), arrays.adam.copy(),
                             {k: np.asarray(v, np.float32).copy() for k, v in arrays.stats.items()}))

    def _set(self, arrays: HostArrays) -> None:
        """New rows: the set changed (the filter no longer matches them)."""
        self.arrays = arrays
        self.filter_3d = None
        self.rows_version += 1

    def apply(self, table: RowTable, edit: RowEdit | None = None) -> None:
        self._set(rows.apply_rows(self.arrays, table, edit))

    def grow(self, decision: RowDecision, room: int) -> GrowReport:
        arrays, report = rows.grow(self.arrays, decision, room)
        self._set(arrays)
        return report

    def reset_opacity(self, value: float) -> None:
        rows.reset_opacity(self.arrays, value, self.filter_3d)

    # -- 3DGS-MCMC's operations (MCMCState: declared by strategy/mcmc.py, not the contract) -----
    def relocate(self, min_opacity: float, key: int) -> int:
        arrays, moved = rows.relocate(self.arrays, min_opacity, key)
        if moved:
            self._set(arrays)
        return moved

    def sample_add(self, count: int, min_opacity: float, key: int) -> int:
        arrays, added = rows.sample_add(self.arrays, count, min_opacity, key)
        if added:
            self._set(arrays)
        return added

    def perturb_means(self, scale: float, key: int) -> None:
        rows.perturb_means(self.arrays, scale, key)

    # -- statistics ------------------------------------------------------------------------------
    def read_stats(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.arrays.stats.items()}

    def clear_stats(self) -> None:
        for v in self.arrays.stats.values():
            v[:] = 0
