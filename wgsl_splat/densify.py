"""Adaptive density control (clone, split, prune, opacity reset), original 3DGS rules.

Runs on the host every ``DensifyConfig.every`` steps on the state a TrainStep hands over (the GPU
path accumulates the statistics on the device and downloads them here, a few MB every 100 steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import DensifyConfig
from .model import GaussianModel, inverse_sigmoid
from .optim import AdamState
from .reference.projection import filter_3d_scales, quat_to_rotmat
from .step import DensifyStats


@dataclass
class DensifyReport:
    cloned: int   # Gaussians duplicated
    split: int    # Gaussians replaced by split_samples samples each
    pruned: int   # Gaussians removed for opacity or size (split originals not counted)
    before: int
    after: int
    max_grad: float
    mean_grad: float
    capped: bool = False   # max_gaussians left out some of the Gaussians that qualified

    def line(self) -> str:
        return (f"densify: N {self.before} -> {self.after} (+{self.cloned} cloned, {self.split} split, "
                f"-{self.pruned} pruned; mean grad {self.mean_grad:.2e}, max {self.max_grad:.2e})"
                + ("; capped by max_gaussians" if self.capped else ""))


def densify_and_prune(model: GaussianModel, adam: AdamState, stats: DensifyStats, cfg: DensifyConfig,
                      extent: float, prune_large: bool, rng: np.random.Generator):
    """One densification round; returns ``(model, adam, fresh stats, report)``.

    Clone small Gaussians (max scale ≤ percent_dense·extent) whose mean NDC gradient reaches the
    threshold; split large ones into ``split_samples`` drawn from the Gaussian with scales divided by
    ``split_scale_div``; then prune the transparent ones and, with ``prune_large`` (after the first
    opacity reset), those larger than ``max_world_scale``·extent in the world and, when
    ``max_screen_size`` > 0, those larger than that many pixels on screen (off by default, see
    :class:`DensifyConfig`); when on, it uses the radii of the interval that ended.

    The grown model (originals, clones, split samples, in that order, as 3DGS appends them) is
    never materialised: the source row of each of its Gaussians decides pruning, and every array
    is gathered once (a round at 258k Gaussians was mostly copies before).
    """
    n0 = len(model)
    grads = stats.mean_grad().astype(np.float64)
    seen = stats.denom > 0
    scales = np.exp(model.log_scales.astype(np.float64))
    max_scale = scales.max(axis=1)
    high = grads >= cfg.grad_threshold
    room = max(0, cfg.max_gaussians - n0)
    clone = high & (max_scale <= cfg.percent_dense * extent)
    split = high & (max_scale > cfg.percent_dense * extent)
    capped = room < clone.sum() + (cfg.split_samples - 1) * split.sum()
    if capped:  # keep the strongest within the cap
        order = np.argsort(-grads)
        budget = np.zeros(n0, bool)
        cost = np.where(clone, 1, np.where(split, cfg.split_samples - 1, 0))[order]
        budget[order[np.cumsum(cost) <= room]] = True
        clone &= budget
        split &= budget
    clone_idx, split_idx = np.flatnonzero(clone), np.flatnonzero(split)

    # split: samples around the original, drawn in its local frame (sample-major order)
    k = cfg.split_samples
    split_scales = scales[split_idx]
    rot = quat_to_rotmat(model.normalized_quats[split_idx].astype(np.float64))
    samples = rng.normal(size=(k, len(split_idx), 3)) * split_scales[None]
    split_means = (np.tile(model.means[split_idx].astype(np.float64), (k, 1))
                   + np.einsum("nij,knj->kni", rot, samples).reshape(-1, 3))
    split_log_scales = np.tile(np.log(split_scales / cfg.split_scale_div), (k, 1))

    # source row of every Gaussian of the grown model, and what is pruned from it
    src = np.concatenate([np.arange(n0), clone_idx, np.tile(split_idx, k)])
    first_split = n0 + len(clone_idx)
    remove = np.concatenate([split, np.zeros(len(src) - n0, bool)])   # split originals go
    remove |= model.opacities[src] < cfg.min_opacity
    if prune_large:
        grown_max_scale = max_scale[src]
        grown_max_scale[first_split:] = np.exp(split_log_scales).max(axis=1, initial=0.0)
        remove |= grown_max_scale > cfg.max_world_scale * extent
        if cfg.max_screen_size > 0:   # new Gaussians have not been seen on screen yet
            remove[:n0] |= stats.max_radii > cfg.max_screen_size
    keep = ~remove

    out = model.subset(src[keep])                        # one gather per array
    kept_split = keep[first_split:]
    at = np.flatnonzero(keep[:first_split]).size + np.arange(int(kept_split.sum()))
    out.means[at] = split_means[kept_split].astype(model.dtype)
    out.log_scales[at] = split_log_scales[kept_split].astype(model.dtype)
    # Adam moments: the kept originals keep theirs (they come first); new Gaussians start at zero
    kept_orig = keep[:n0]
    n_orig = int(kept_orig.sum())

    def moments(old: GaussianModel) -> GaussianModel:
        new = old.map(lambda a: np.zeros((len(out),) + a.shape[1:], a.dtype))
        for name, a in old.arrays().items():
            new.arrays()[name][:n_orig] = a[kept_orig]
        return new

    new_adam = AdamState(moments(adam.m), moments(adam.v), adam.step)
    pruned = int(remove.sum()) - int(split.sum())
    report = DensifyReport(len(clone_idx), len(split_idx), pruned, n0, len(out),
                           float(grads[seen].max()) if seen.any() else 0.0,
                           float(grads[seen].mean()) if seen.any() else 0.0, bool(capped))
    return out, new_adam, DensifyStats.zeros(len(out)), report


def reset_opacity(model: GaussianModel, adam: AdamState, value: float,
                  filter_3d: np.ndarray | None = None) -> None:
    """opacity ← min(opacity, value), and zero its Adam moments (3DGS ``reset_opacity``).

    With the antialiased mode's ``filter_3d`` the cap applies to the opacity as rendered, σ·c3
    (Mip-Splatting's ``reset_opacity``): σ ← min(σ·c3, value) / c3."""
    opacity = model.opacities.astype(np.float64)
    comp3 = 1.0
    if filter_3d is not None:
        _, comp3 = filter_3d_scales(np.exp(model.log_scales.astype(np.float64)), filter_3d)
    capped = np.minimum(opacity * comp3, value) / comp3
    model.opacity_logits[:] = inverse_sigmoid(capped).astype(model.dtype)
    adam.reset_group("opacity_logits")
