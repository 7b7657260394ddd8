"""Counter-based random numbers shared by the NumPy path and the WGSL kernels (shaders/random.wgsl).

Densification draws random numbers on the device (split samples, MCMC's sampling and position
noise). For the NumPy path to be the oracle of those kernels, both must draw the *same* numbers:
each number is a pure function of ``(seed, stream, index, k)`` — no generator state — computed
with the same 32-bit integer operations in both languages:

    key   = pcg(pcg(seed) + stream)          # one key per (seed, stream): e.g. a refine round
    bits  = pcg(pcg(key + index) + k)        # the k-th number of element ``index``

``pcg`` is the PCG-RXS-M-XS 32-bit hash ("Hash Functions for GPU Rendering", Jarzynski and
Olano, JCGT 2020), a good and cheap integer hash. Uniforms are ``((bits >> 8) + 1) / 2^24`` in
(0, 1], exact in float32; normals come from the Box-Muller transform of two uniforms (float32 on
the device, float64 here: they agree to float32 rounding).
"""

from __future__ import annotations

import numpy as np

_U32 = np.uint32


def pcg(v) -> np.ndarray:
    """The PCG-RXS-M-XS hash of uint32 values (wrapping arithmetic, as WGSL's u32)."""
    v = np.asarray(v, dtype=_U32)
    with np.errstate(over="ignore"):
        state = v * _U32(747796405) + _U32(2891336453)
        word = ((state >> ((state >> _U32(28)) + _U32(4))) ^ state) * _U32(277803737)
    return (word >> _U32(22)) ^ word


def stream_key(seed: int, stream: int) -> np.uint32:
    """The key of one stream (``seed`` and ``stream`` taken modulo 2^32)."""
    with np.errstate(over="ignore"):
        return pcg(pcg(_U32(seed & 0xFFFFFFFF)) + _U32(stream & 0xFFFFFFFF))


def random_bits(key, index, k=0) -> np.ndarray:
    """uint32 random bits of element ``index`` (array), number ``k`` (scalar or array)."""
    with np.errstate(over="ignore"):
        return pcg(pcg(_U32(key) + np.asarray(index, dtype=_U32)) + np.asarray(k, dtype=_U32))


def uniform(key, index, k=0) -> np.ndarray:
    """Uniform numbers in (0, 1] (float64 holding float32-exact values)."""
    return ((random_bits(key, index, k) >> _U32(8)).astype(np.float64) + 1.0) * 2.0 ** -24


def normal3(key, index) -> np.ndarray:
    """Three standard normal numbers per element, shape ``index.shape + (3,)``: Box-Muller of
    uniforms k = 0, 1 (giving components 0, 1) and 2, 3 (component 2, the sine of the second pair
    unused)."""
    index = np.asarray(index)
    u = [uniform(key, index, k) for k in range(4)]
    r0, r1 = np.sqrt(-2.0 * np.log(u[0])), np.sqrt(-2.0 * np.log(u[2]))
    a0, a1 = 2.0 * np.pi * u[1], 2.0 * np.pi * u[3]
    return np.stack([r0 * np.cos(a0), r0 * np.sin(a0), r1 * np.cos(a1)], axis=-1)
