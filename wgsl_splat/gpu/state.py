"""The GPU path's training state: the per-Gaussian arrays in device buffers.

Interim implementation: the row operations go through the host (download, NumPy, upload) exactly
as :class:`~wgsl_splat.reference.state.HostState` does them.
"""

from __future__ import annotations

from ..reference import rows
from ..state import ADCRound, DensifyReport, HostArrays, RowEdit, RowTable, TrainState


class DeviceState(TrainState):
    def __init__(self, step, stat_names) -> None:
        self.step = step
        self.stat_names = tuple(stat_names)

    @property
    def n(self) -> int:
        return self.step.renderer.num

    def download(self) -> HostArrays:
        return self.step._download()

    def upload(self, arrays: HostArrays) -> None:
        if tuple(arrays.stats) != self.stat_names:
            raise ValueError(f"statistics {tuple(arrays.stats)} given, this state keeps "
                             f"{self.stat_names}")
        self.step._upload(arrays)

    def _edit(self, fn, changes_rows: bool = True):
        a = self.download()
        out = fn(a)
        self.upload(out[0] if isinstance(out, tuple) else (a if out is None else out))
        if changes_rows:
            self.rows_version += 1
        return out[1] if isinstance(out, tuple) else None

    def apply(self, table: RowTable, edit: RowEdit | None = None) -> None:
        self._edit(lambda a: rows.apply_rows(a, table, edit))

    def reset_opacity(self, value: float) -> None:
        self._edit(lambda a: rows.reset_opacity(a, value, self.step.filter_3d()),
                   changes_rows=False)

    def densify_adc(self, rnd: ADCRound) -> DensifyReport:
        return self._edit(lambda a: rows.densify_adc(a, rnd))

    def relocate(self, min_opacity: float, key: int) -> int:
        return self._edit(lambda a: rows.relocate(a, min_opacity, key))

    def add_by_opacity(self, count: int, min_opacity: float, key: int) -> int:
        return self._edit(lambda a: rows.add_by_opacity(a, count, min_opacity, key))

    def perturb_means(self, scale: float, key: int) -> None:
        self._edit(lambda a: rows.perturb_means(a, scale, key), changes_rows=False)
