"""Row operations on the host: the semantics the device kernels (``gpu/shaders/state_rows.wgsl``,
``grow.wgsl``, ``relocation.wgsl``) implement and are tested against. See :mod:`wgsl_splat.contract.state` for the row table.

Decisions are taken in float32 on the same values the device sees, and every threshold is
compared where no transcendental function is needed (logits instead of opacities, log-scales
instead of scales, ``grad_accum >= threshold · max(denom, 1)`` instead of a division), so the two
paths take the same decisions bit for bit; random numbers come from :mod:`wgsl_splat.counter_rng`.

Sampling in proportion to opacity (MCMC) uses integer weights ``floor(o · 2^q)`` with the largest q
for which the total fits 32 bits: the cumulative sums are then exact on both paths, and a draw is
``bits mod total`` located in them.
"""

from __future__ import annotations

import math

import numpy as np

from .. import counter_rng as crng
from ..contract.filter3d import filter_3d_scales
from ..contract.optim import AdamState
from ..contract.rows import (
    F32_EPS,
    NOISE_GATE_K,
    NOISE_GATE_X0,
    RELOCATION_MAX_RATIO,
    SIGMOID_RANGE,
    SIGMOID_STEPS,
    SIGMOID_TABLE,
    weight_bits,
)
from ..contract.state import (
    KEEP,
    MAX_SPLIT_SAMPLES,
    NEW,
    RELOCATE,
    SPLIT,
    GrowReport,
    HostArrays,
    RowDecision,
    RowEdit,
    RowTable,
    budget,
)
from ..model import inverse_sigmoid
from .projection import quat_to_rotmat

# ------------------------------------------------------------------------------ the row table

def apply_rows(a: HostArrays, table: RowTable, edit: RowEdit | None = None) -> HostArrays:
    """Every per-Gaussian array rebuilt from ``table`` (one gather per array)."""
    edit = edit or RowEdit()
    src, kind = table.src, table.kind
    new = kind != KEEP
    model = a.model.subset(src)
    moments = [a.adam.m.subset(src), a.adam.v.subset(src)]
    for mom in moments:
        for arr in mom.arrays().values():
            arr[new] = 0
    stats = {}
    for name, arr in a.stats.items():
        stats[name] = arr[src]
        stats[name][new] = 0
    split = np.flatnonzero(kind == SPLIT)
    if len(split):
        i, j = src[split], table.sample[split].astype(np.int64)
        scales = np.exp(model.log_scales[split].astype(np.float64))
        rot = quat_to_rotmat(model.normalized_quats[split].astype(np.float64))
        z = crng.normal3(edit.key, (i * MAX_SPLIT_SAMPLES + j).astype(np.uint32))
        model.means[split] = (model.means[split] + np.einsum("nij,nj->ni", rot, scales * z)
                              ).astype(model.dtype)
        model.log_scales[split] = (model.log_scales[split].astype(np.float64)
                                   - math.log(edit.split_scale_div)).astype(model.dtype)
    reloc = np.flatnonzero(kind == RELOCATE)
    if len(reloc):
        r = np.asarray(edit.relocated)[src[reloc]]
        model.opacity_logits[reloc] = r[:, 0].astype(model.dtype)
        model.log_scales[reloc] = (model.log_scales[reloc] + r[:, 1:2]).astype(model.dtype)
    return HostArrays(model, AdamState(moments[0], moments[1], a.adam.step), stats)


def reset_opacity(a: HostArrays, value: float, filter_3d: np.ndarray | None = None) -> None:
    """opacity ← min(opacity, value), its moments zeroed (in place). With the antialiased mode's
    ``filter_3d`` the cap applies to the opacity as rendered, σ·c3 (Mip-Splatting's
    ``reset_opacity``): σ ← min(σ·c3, value) / c3."""
    m = a.model
    if filter_3d is None:
        m.opacity_logits[:] = np.minimum(m.opacity_logits, np.float32(inverse_sigmoid(value)))
    else:
        opacity = 1.0 / (1.0 + np.exp(-m.opacity_logits.astype(np.float64)))
        _, comp3 = filter_3d_scales(np.exp(m.log_scales.astype(np.float64)), filter_3d)
        capped = np.minimum(opacity * comp3, value) / comp3
        m.opacity_logits[:] = inverse_sigmoid(capped).astype(m.dtype)
    a.adam.reset_group("opacity_logits")


# ------------------------------------------------------------------------------------ grow

def grow(a: HostArrays, decision: RowDecision, room: int) -> tuple[HostArrays, GrowReport]:
    """:meth:`TrainState.grow` on host arrays (the semantics ``gpu/shaders/grow.wgsl`` implements)."""
    n = len(a)
    d = decision.numpy(a, np.ones(n, bool))
    capped = int(np.sum(d.cost, dtype=np.int64)) > room
    if capped:
        score = decision.score({k: a.stats[k] for k in decision.score_stats})
        d = decision.numpy(a, budget(score, d.cost, room))
    keep, clone, split = (np.flatnonzero(x) for x in (d.keep, d.clone, d.split))
    k = decision.split_samples
    src = np.concatenate([keep, clone] + [split] * k)
    kind = np.concatenate([np.full(len(keep), KEEP), np.full(len(clone), NEW),
                           np.full(k * len(split), SPLIT)])
    sample = np.concatenate([np.zeros(len(keep) + len(clone))]
                            + [np.full(len(split), j) for j in range(k)])
    out = apply_rows(a, RowTable(src, kind, sample), RowEdit(decision.split_scale_div, decision.key))
    counts = tuple(int(c) for c in np.sum(d.counts, axis=0, dtype=np.int64)) if n else (0, 0, 0)
    peak = float(np.max(d.peak, initial=0.0))
    return out, GrowReport(n, len(src), len(keep), len(clone), len(split), counts, peak, capped)


# ------------------------------------------------------------------------------------- MCMC

def relocation(opacity: np.ndarray, ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3DGS-MCMC's relocation (Kheradmand et al. 2024, eq. 9), as gsplat computes it: ``ratio``
    copies of a Gaussian of opacity o get opacity ``1 - (1 - o)^(1/ratio)`` and scales multiplied
    by ``o / Σ_{i=1..ratio} Σ_{k=0..i-1} C(i-1, k) (-1)^k o_new^(k+1) / sqrt(k+1)``. Returns
    ``(new opacity, scale factor)`` in float64."""
    o = np.asarray(opacity, np.float64)
    n = np.minimum(np.asarray(ratio, np.int64), RELOCATION_MAX_RATIO)
    new_o = 1.0 - np.power(1.0 - o, 1.0 / n)
    denom = np.zeros_like(o)
    for i in range(1, int(n.max(initial=1)) + 1):
        for kk in range(i):
            term = math.comb(i - 1, kk) * (-1) ** kk / math.sqrt(kk + 1) * new_o ** (kk + 1)
            denom += np.where(i <= n, term, 0.0)
    return new_o, o / denom


def opacity_weights(logits: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
    """uint64 weights floor(σ(logit)·2^q) (σ from :data:`SIGMOID_TABLE`), zero where ``exclude``."""
    half = SIGMOID_RANGE * SIGMOID_STEPS
    idx = np.clip(np.round(logits.astype(np.float32) * np.float32(SIGMOID_STEPS)), -half, half)
    o = SIGMOID_TABLE[idx.astype(np.int64) + half]
    w = np.floor(o * np.float32(2 ** weight_bits(len(logits)))).astype(np.uint64)
    if exclude is not None:
        w[exclude] = 0
    return w


def draw_sources(weights: np.ndarray, key: int, draw_ids: np.ndarray) -> np.ndarray:
    """For each draw id, the row whose weight interval holds ``bits(key, id) mod total``."""
    cdf = np.cumsum(weights)
    r = crng.random_bits(key, draw_ids.astype(np.uint32)).astype(np.uint64) % cdf[-1]
    return np.searchsorted(cdf, r, side="right")


def relocated_values(a: HostArrays, sources: np.ndarray, min_opacity: float) -> np.ndarray:
    """(N, 2) float32: new opacity logit and log-scale shift of each drawn source (``counts+1``
    copies of it, the original included); rows not drawn are left zero."""
    n = len(a)
    counts = np.bincount(sources, minlength=n)
    drawn = np.flatnonzero(counts)
    o = 1.0 / (1.0 + np.exp(-a.model.opacity_logits[drawn].astype(np.float64)))
    new_o, factor = relocation(o, counts[drawn] + 1)
    new_o = np.clip(new_o, min_opacity, 1.0 - F32_EPS)
    out = np.zeros((n, 2), np.float32)
    out[drawn, 0] = np.log(new_o / (1.0 - new_o))
    out[drawn, 1] = np.log(factor)
    return out


def relocate(a: HostArrays, min_opacity: float, key: int) -> tuple[HostArrays, int]:
    """Dead rows (opacity ≤ min) take the relocated parameters of live rows drawn ∝ opacity."""
    logit = a.model.opacity_logits.astype(np.float32)
    dead = logit <= np.float32(inverse_sigmoid(min_opacity))
    weights = opacity_weights(logit, exclude=dead)
    dead_rows = np.flatnonzero(dead)
    if len(dead_rows) == 0 or weights.sum() == 0:
        return a, 0
    sources = draw_sources(weights, key, dead_rows)
    relocated = relocated_values(a, sources, min_opacity)
    src = np.arange(len(a))
    kind = np.full(len(a), KEEP)
    kind[np.unique(sources)] = RELOCATE
    src[dead_rows] = sources
    kind[dead_rows] = RELOCATE
    return apply_rows(a, RowTable(src, kind), RowEdit(relocated=relocated)), len(dead_rows)


def sample_add(a: HostArrays, count: int, min_opacity: float, key: int
                   ) -> tuple[HostArrays, int]:
    """``count`` new rows, each the relocation of a row drawn ∝ opacity (all rows eligible)."""
    n = len(a)
    weights = opacity_weights(a.model.opacity_logits)
    if count <= 0 or weights.sum() == 0:
        return a, 0
    sources = draw_sources(weights, key, np.arange(n, n + count))
    relocated = relocated_values(a, sources, min_opacity)
    src = np.concatenate([np.arange(n), sources])
    kind = np.full(n + count, RELOCATE)
    kind[:n] = KEEP
    kind[np.unique(sources)] = RELOCATE
    return apply_rows(a, RowTable(src, kind), RowEdit(relocated=relocated)), count


def perturb_means(a: HostArrays, scale: float, key: int) -> None:
    """MCMC position noise (in place): means += Σ·(z·gate·scale), Σ = R S² Rᵀ the Gaussian's
    covariance, gate = σ(100·(1 − o − 0.995)) ≈ 1 only for nearly transparent Gaussians."""
    m = a.model
    n = len(m)
    if n == 0 or scale == 0:
        return
    o = 1.0 / (1.0 + np.exp(-m.opacity_logits.astype(np.float64)))
    gate = 1.0 / (1.0 + np.exp(-NOISE_GATE_K * ((1.0 - o) - NOISE_GATE_X0)))
    z = crng.normal3(key, np.arange(n, dtype=np.uint32)) * (gate * scale)[:, None]
    rot = quat_to_rotmat(m.normalized_quats.astype(np.float64))
    s2 = np.exp(2.0 * m.log_scales.astype(np.float64))
    # Σ z = R (S² (Rᵀ z))
    local = np.einsum("nji,nj->ni", rot, z) * s2
    m.means[:] = (m.means + np.einsum("nij,nj->ni", rot, local)).astype(m.dtype)

