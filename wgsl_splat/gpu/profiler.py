"""Per-stage device time from timestamp queries (optional feature ``timestamp-query``).

A profiled step records each stage into a compute pass of its own whose beginning and end write a
timestamp; :meth:`StageTimer.read` resolves them (one blocking read, outside the step) into
milliseconds per stage. Splitting the step into passes changes nothing in what is computed; on some
drivers a pass boundary costs a little, so profiled steps are for breakdowns, and unprofiled steps
(one pass) for the headline time. Adapters without timestamp queries get ``available = False`` and
the caller falls back to fenced host timing.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .pool import BufferPool
from .runtime import GpuContext

MAX_STAGES = 32


class StageTimer:
    def __init__(self, ctx: GpuContext, pool: BufferPool) -> None:
        self.ctx = ctx
        self.pool = pool
        self.available = ctx.has_timestamps
        self.names: list[str] = []
        if self.available:
            import wgpu  # noqa: PLC0415

            self.query_set = ctx.device.create_query_set(type="timestamp", count=2 * MAX_STAGES,
                                                         label="stage timestamps")
            u = wgpu.BufferUsage
            pool.get("timestamps", 16 * MAX_STAGES, u.QUERY_RESOLVE | u.COPY_SRC)

    def reset(self) -> None:
        self.names = []

    @contextlib.contextmanager
    def stage(self, encoder, name: str):
        """A compute pass for one stage; timed when the adapter has timestamp queries."""
        kwargs = {}
        if self.available:
            if len(self.names) >= MAX_STAGES:
                raise RuntimeError(f"more than {MAX_STAGES} timed stages")
            i = len(self.names)
            self.names.append(name)
            kwargs["timestamp_writes"] = {"query_set": self.query_set,
                                          "beginning_of_pass_write_index": 2 * i,
                                          "end_of_pass_write_index": 2 * i + 1}
        cpass = encoder.begin_compute_pass(label=name, **kwargs)
        yield cpass
        cpass.end()

    def resolve(self, encoder) -> None:
        """Record the resolve of this step's timestamps (before finishing the encoder)."""
        if self.available and self.names:
            encoder.resolve_query_set(self.query_set, 0, 2 * len(self.names),
                                      self.pool["timestamps"], 0)

    def read(self) -> dict[str, float]:
        """Milliseconds per stage of the last resolved step (blocking); stages with the same name
        are summed. WebGPU resolves timestamps in nanoseconds."""
        if not (self.available and self.names):
            return {}
        ts = self.pool.read_array("timestamps", np.uint64, 2 * len(self.names)).reshape(-1, 2)
        out: dict[str, float] = {}
        for name, (a, b) in zip(self.names, ts):
            out[name] = out.get(name, 0.0) + max(int(b) - int(a), 0) * 1e-6
        return out
