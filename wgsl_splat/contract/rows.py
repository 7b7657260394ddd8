"""Facts of the row operations that both paths share (the NumPy ones in
:mod:`wgsl_splat.reference.rows`, the device kernels ``state_rows.wgsl``, ``grow.wgsl``,
``relocation.wgsl``): the random streams, the threshold that is off, the relocation's and the
opacity sampling's constants, and their WGSL (the generated ``row_constants.wgsl``)."""

from __future__ import annotations

import math

import numpy as np

from .. import counter_rng as crng
from .state import row_kinds_wgsl

RELOCATION_MAX_RATIO = 51      # gsplat's binomial table: at most 51 copies of one source
F32_EPS = float(np.finfo(np.float32).eps)
NOISE_GATE_K, NOISE_GATE_X0 = 100.0, 0.995   # MCMC: σ(k·(1 − o − x0)) gates the position noise

OFF = np.float32(3.0e38)         # a threshold that is off (finite: the device compares the same)


def row_constants_wgsl() -> str:
    """The row operations' constants as WGSL (the generated ``row_constants.wgsl``): the row kinds
    and the constants of the relocation and its sampling, declared here once."""
    return row_kinds_wgsl() + "\n".join([
        f"const RELOCATION_MAX_RATIO: u32 = {RELOCATION_MAX_RATIO}u;",
        f"const F32_EPS: f32 = {F32_EPS!r};",
        f"const NOISE_GATE_K: f32 = {NOISE_GATE_K!r};",
        f"const NOISE_GATE_X0: f32 = {NOISE_GATE_X0!r};",
        f"const SIGMOID_STEPS: f32 = {float(SIGMOID_STEPS)!r};",
        f"const SIGMOID_HALF: f32 = {float(SIGMOID_RANGE * SIGMOID_STEPS)!r};"]) + "\n"


# One random stream per purpose and step: stream = step · 4 + purpose.
STREAM_SPLIT, STREAM_RELOCATE, STREAM_ADD, STREAM_NOISE = range(4)


def stream(seed: int, step: int, purpose: int) -> int:
    return int(crng.stream_key(seed, step * 4 + purpose))


def weight_bits(n: int) -> int:
    """q of the integer weights floor(o·2^q): the largest (≤ 24) with n·2^q < 2^32."""
    return int(min(24, math.floor(math.log2((2 ** 32 - 1) / max(n, 1)))))


# Opacities for sampling are read from a table of σ at logits k/64 (|logit| ≤ 16): the index is
# round(64·logit), exact in float32 on both paths, so the weights are equal bit for bit (an exp()
# differs in its last bits between NumPy and a GPU, and a weight floor(σ·2^q) with it). The table
# is 0.4 % coarse in σ: immaterial for sampling in proportion to opacity.
SIGMOID_STEPS, SIGMOID_RANGE = 64, 16
SIGMOID_TABLE = (1.0 / (1.0 + np.exp(-np.arange(-SIGMOID_RANGE * SIGMOID_STEPS,
                                                SIGMOID_RANGE * SIGMOID_STEPS + 1) / SIGMOID_STEPS))
                 ).astype(np.float32)
