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
from .reference.projection import quat_to_rotmat
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

    def line(self) -> str:
        return (f"densify: N {self.before} -> {self.after} (+{self.cloned} cloned, {self.split} split, "
                f"-{self.pruned} pruned; mean grad {self.mean_grad:.2e}, max {self.max_grad:.2e})")


def _append(model: GaussianModel, adam: AdamState, new: GaussianModel):
    return GaussianModel.concatenate([model, new.astype(model.dtype)]), adam.extend(len(new))


def densify_and_prune(model: GaussianModel, adam: AdamState, stats: DensifyStats, cfg: DensifyConfig,
                      extent: float, prune_large: bool, rng: np.random.Generator):
    """One densification round; returns ``(model, adam, fresh stats, report)``.

    Clone small Gaussians (max scale ≤ percent_dense·extent) whose mean NDC gradient reaches the
    threshold; split large ones into ``split_samples`` drawn from the Gaussian with scales divided by
    ``split_scale_div``; then prune the transparent ones and, with ``prune_large`` (after the first
    opacity reset), those larger than ``max_world_scale``·extent in the world and, when
    ``max_screen_size`` > 0, those larger than that many pixels on screen (off by default, see
    :class:`DensifyConfig`); when on, it uses the radii of the interval that ended.
    """
    n0 = len(model)
    grads = stats.mean_grad().astype(np.float64)
    seen = stats.denom > 0
    max_scale = np.exp(model.log_scales.astype(np.float64)).max(axis=1)
    high = grads >= cfg.grad_threshold
    room = max(0, cfg.max_gaussians - n0)
    clone = high & (max_scale <= cfg.percent_dense * extent)
    split = high & (max_scale > cfg.percent_dense * extent)
    if room < clone.sum() + (cfg.split_samples - 1) * split.sum():  # keep the strongest within the cap
        order = np.argsort(-grads)
        budget = np.zeros(n0, bool)
        cost = np.where(clone, 1, np.where(split, cfg.split_samples - 1, 0))[order]
        budget[order[np.cumsum(cost) <= room]] = True
        clone &= budget
        split &= budget

    # split: samples around the original, drawn in its local frame
    k = cfg.split_samples
    src = model.subset(split)
    scales = np.exp(src.log_scales.astype(np.float64))
    rot = quat_to_rotmat(src.normalized_quats.astype(np.float64))
    samples = rng.normal(size=(k, len(src), 3)) * scales[None]
    new_split = GaussianModel.concatenate([src] * k) if len(src) else src.copy()
    new_split.means = (np.concatenate([src.means.astype(np.float64)] * k)
                       + np.einsum("nij,knj->kni", rot, samples).reshape(-1, 3)).astype(model.dtype)
    new_split.log_scales = np.log(np.concatenate([scales] * k) / cfg.split_scale_div).astype(model.dtype)
    new_clone = model.subset(clone).copy()

    max_radii = stats.max_radii
    model, adam = _append(model, adam, new_clone)
    model, adam = _append(model, adam, new_split)
    max_radii = np.concatenate([max_radii, np.zeros(len(new_clone) + len(new_split), max_radii.dtype)])
    remove = np.concatenate([split, np.zeros(len(new_clone) + len(new_split), bool)])
    remove |= model.opacities < cfg.min_opacity
    if prune_large:
        if cfg.max_screen_size > 0:
            remove |= max_radii > cfg.max_screen_size
        remove |= np.exp(model.log_scales.astype(np.float64)).max(axis=1) > cfg.max_world_scale * extent
    pruned = int(remove.sum()) - int(split.sum())
    keep = ~remove
    model, adam = model.subset(keep).copy(), adam.select(keep)
    report = DensifyReport(int(clone.sum()), int(split.sum()), pruned, n0, len(model),
                           float(grads[seen].max()) if seen.any() else 0.0,
                           float(grads[seen].mean()) if seen.any() else 0.0)
    return model, adam, DensifyStats.zeros(len(model)), report


def reset_opacity(model: GaussianModel, adam: AdamState, value: float) -> None:
    """opacity ← min(opacity, value), and zero its Adam moments (3DGS ``reset_opacity``)."""
    capped = np.minimum(model.opacities.astype(np.float64), value)
    model.opacity_logits[:] = inverse_sigmoid(capped).astype(model.dtype)
    adam.reset_group("opacity_logits")
