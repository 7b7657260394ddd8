"""How many Gaussians a training step's device holds (docs/design.md §3, "Paged state").

The adapter's bindings bound N (:func:`~wgsl_splat.gpu.renderer.max_gaussians`), and so does its
memory: with a known budget (:attr:`~wgsl_splat.gpu.runtime.GpuContext.memory_bytes`, a CPU
adapter's or ``WGSL_SPLAT_DEVICE_MEMORY``) from what one more Gaussian costs the step and what
does not grow with N; on a GPU, which WebGPU does not ask for its memory, by allocating what a
grown step needs before a row operation starts (:meth:`MemoryPlan.room_for`).
"""

from __future__ import annotations

from .backward import GRAD2D_FLOATS
from .pages import RECT_BYTES, SPLAT_BYTES, row_bytes
from .renderer import max_gaussians

#: room kept free for the buffers a step makes on demand (read-back staging, uniforms, tables)
MARGIN_BYTES = 16 << 20


class MemoryPlan:
    """The memory arithmetic of one :class:`~wgsl_splat.gpu.step.GpuTrainStep`: it reads the
    step's renderer (SH coefficients, image size, tables), loss variant, statistics, render mode
    and whether Adam is fused."""

    def __init__(self, step) -> None:
        self.step = step
        self.ctx = step.ctx
        self.cap: int | None = None    # found by room_for on a device of unknown memory

    def max_gaussians(self) -> int:
        """The most Gaussians the step can hold: what the adapter's bindings reach and what its
        memory budget holds beside the image-sized buffers of the views trained so far, a row
        operation's headroom included."""
        cap = max_gaussians(self.ctx, self.step.renderer.sh_coeffs)
        budget = self.ctx.memory_bytes
        if budget is not None:
            cap = min(cap, max(0, budget - self.fixed_bytes()) // self.bytes_per_gaussian(True))
        if self.cap is not None:
            cap = min(cap, self.cap)
        return cap

    def room_for(self, n: int, extra: int) -> int:
        """How many of ``extra`` more Gaussians beside ``n`` the device holds. With a memory
        budget, :meth:`max_gaussians` already bounded the strategy's room; without one the bytes
        the grown step needs beyond what it holds are allocated and freed, halving ``extra``
        until they fit; the count found then bounds :meth:`max_gaussians` (:attr:`cap`), so
        growth stops with the strategy's log line instead of an out-of-memory error halfway
        through a row operation."""
        if extra <= 0 or self.ctx.memory_bytes is not None:
            return extra
        asked = extra
        held = n * self.bytes_per_gaussian()
        while extra > 0 and not self.ctx.can_allocate(
                (n + extra) * self.bytes_per_gaussian(True) - held + MARGIN_BYTES):
            extra //= 2
        if extra < asked:
            self.cap = n + extra
        return extra

    def bytes_per_gaussian(self, headroom: bool = False) -> int:
        """Device bytes one more Gaussian costs in a step: parameters and moments, gradients
        unless Adam is fused, the splat, its gradients, rectangle and depth-sort entries, the
        statistics, the 3D filter, room for intersections (12 at 4 bytes); ``headroom``: plus
        what a row operation needs beyond the step (one array's new pages while the old ones
        exist, the step's per-splat buffers freed)."""
        step = self.step
        k = step.renderer.sh_coeffs
        per = row_bytes(k) * (3 if step.fused_adam else 4)
        per_splat = SPLAT_BYTES + 4 * GRAD2D_FLOATS + RECT_BYTES + 16
        per += per_splat + 4 * max(len(step.statistics), 1) + 4 * step.render_config.antialiased
        per += 48
        if headroom:
            per += max(row_bytes(k) - per_splat, 0)
        return per

    def fixed_bytes(self) -> int:
        """Device bytes that do not grow with N: the image-sized buffers of the largest view so
        far (the image, last contributors and transmittances, dL/dimage, the loss's scratch, one
        resident training image), the emission and sort tables, and a margin."""
        step = self.step
        r = step.renderer
        pixels = r.width * r.height
        loss = 36 if step.loss.variant == "tiled" else 48
        pair_table = r.pair_sort.table if r.pair_sort is not None else None
        tables = sum(step.pool.size(n) for n in ("emit_table", "emit_remaining",
                                                 r.depth_sort.table, pair_table)
                     if n and n in step.pool)
        return pixels * (12 + 8 + 12 + loss + 12) + tables + MARGIN_BYTES

    def cache_budget(self, limit: int, resident: int) -> int:
        """Bytes the resident training images may take now: ``limit``, within what the memory
        budget leaves beside everything else the pool holds (``resident``: the images' own)."""
        budget = self.ctx.memory_bytes
        if budget is None:
            return limit
        others = self.step.pool.current_bytes - resident
        return max(0, min(limit, budget - others - MARGIN_BYTES))
