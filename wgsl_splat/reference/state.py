"""The NumPy path's training state: host arrays edited by :mod:`wgsl_splat.reference.rows`."""

from __future__ import annotations

import numpy as np

from ..state import ADCRound, DensifyReport, HostArrays, RowEdit, RowTable, TrainState
from . import rows


class HostState(TrainState):
    """Parameters (float32), Adam moments and statistics as NumPy arrays (:class:`HostArrays`)."""

    def __init__(self, arrays: HostArrays) -> None:
        self.stat_names = tuple(arrays.stats)
        self.arrays = arrays
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
        self.arrays = HostArrays(arrays.model.astype(np.float32), arrays.adam.copy(),
                                 {k: np.asarray(v, np.float32).copy() for k, v in arrays.stats.items()})

    def apply(self, table: RowTable, edit: RowEdit | None = None) -> None:
        self.arrays = rows.apply_rows(self.arrays, table, edit)

    def reset_opacity(self, value: float) -> None:
        rows.reset_opacity(self.arrays, value)

    def densify_adc(self, rnd: ADCRound) -> DensifyReport:
        self.arrays, report = rows.densify_adc(self.arrays, rnd)
        return report

    def relocate(self, min_opacity: float, key: int) -> int:
        self.arrays, moved = rows.relocate(self.arrays, min_opacity, key)
        return moved

    def add_by_opacity(self, count: int, min_opacity: float, key: int) -> int:
        self.arrays, added = rows.add_by_opacity(self.arrays, count, min_opacity, key)
        return added

    def perturb_means(self, scale: float, key: int) -> None:
        rows.perturb_means(self.arrays, scale, key)
