"""The device a step's stages share: the adapter's context, its buffer pool and shader library.

Every stage binds buffers by their pool names and compiles through one library, so they travel
together as one value (:class:`Gpu`) instead of as a triple through each constructor.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pool import BufferPool
from .runtime import GpuContext
from .shaders import ShaderLibrary


@dataclass(frozen=True, eq=False)
class Gpu:
    ctx: GpuContext
    pool: BufferPool
    lib: ShaderLibrary

    @classmethod
    def of(cls, where: "Gpu | GpuContext") -> "Gpu":
        """``where`` itself, or a fresh pool and library on the context ``where``."""
        if isinstance(where, Gpu):
            return where
        return cls(where, BufferPool(where), ShaderLibrary(where))
