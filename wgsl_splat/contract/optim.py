"""Adam optimiser and learning-rate schedule of docs/design.md §2, shared by the CPU and GPU paths.

The configuration (:class:`OptimConfig`) and the schedule (:func:`expon_lr`) are what both paths
read: the GPU Adam kernel takes ``config.lrs(t)`` and ``config.bias_corrections(t)`` as uniforms.
:func:`adam_step` is the NumPy reference update that kernel is tested against.

The update is PyTorch's ``torch.optim.Adam`` (no weight decay, no amsgrad) as the original 3DGS uses
it, one parameter group per stored array with its own learning rate, and the SH array split into a
DC group (coefficient 0) and a rest group (coefficients 1..K-1):

    m ← β1·m + (1-β1)·g          v ← β2·v + (1-β2)·g²          (t counts steps from 1)
    p ← p - lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)

Learning-rate units are "parameter units per step" for a unit-normalised Adam direction (Adam's step
is ≈ lr whatever the gradient's scale): world units for means (hence the scaling by the scene
extent), natural-log units for log-scales, raw quaternion components for rotations, logits for
opacity and SH coefficient units for colour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..model import PARAM_GROUPS, GaussianModel
from ..options import option

#: Learning-rate groups. ``sh`` is split: coefficient 0 is ``sh_dc``, 1..K-1 are ``sh_rest``.
LR_GROUPS = ("means", "log_scales", "quats", "opacity_logits", "sh_dc", "sh_rest")
# every group but the means (whose rate decays): its rate is constant, as in 3DGS, and is this field
CONSTANT_RATES = {"log_scales": "scale_lr", "quats": "rotation_lr", "opacity_logits": "opacity_lr",
                  "sh_dc": "sh_dc_lr", "sh_rest": "sh_rest_lr"}


def expon_lr(step: float, lr_init: float, lr_final: float, max_steps: int,
             lr_delay_steps: int = 0, lr_delay_mult: float = 1.0) -> float:
    """3DGS ``get_expon_lr_func`` (from Plenoxels / JaxNeRF) evaluated at ``step``.

    ``lr_init`` at step 0, ``lr_final`` at ``max_steps`` (and after), log-linear in between. With
    ``lr_delay_steps > 0`` the rate is further multiplied by
    ``lr_delay_mult + (1 - lr_delay_mult)·sin(π/2·clip(step/lr_delay_steps, 0, 1))``, which eases it
    in from ``lr_init·lr_delay_mult``. A negative step, or both rates 0, disables the group (0.0).
    """
    if step < 0 or (lr_init == 0.0 and lr_final == 0.0):
        return 0.0
    if lr_delay_steps > 0:
        delay = lr_delay_mult + (1.0 - lr_delay_mult) * math.sin(
            0.5 * math.pi * min(max(step / lr_delay_steps, 0.0), 1.0))
    else:
        delay = 1.0
    t = min(max(step / max_steps, 0.0), 1.0)
    return delay * math.exp(math.log(lr_init) * (1.0 - t) + math.log(lr_final) * t)


def get_expon_lr_func(lr_init: float, lr_final: float, lr_delay_steps: int = 0,
                      lr_delay_mult: float = 1.0, max_steps: int = 1_000_000) -> Callable[[float], float]:
    """Same signature and defaults as 3DGS's ``utils.general_utils.get_expon_lr_func``."""
    return lambda step: expon_lr(step, lr_init, lr_final, max_steps, lr_delay_steps, lr_delay_mult)


@dataclass(frozen=True)
class OptimConfig:
    """Adam hyper-parameters and per-group learning rates (3DGS defaults, docs/design.md §2).

    ``extent`` is the scene extent (3DGS ``spatial_lr_scale``, the camera-centre radius ×1.1); only
    the means' rates are scaled by it. ``max_steps`` is the length of the means' decay (3DGS
    ``position_lr_max_steps``; the trainer sets it to the run length). ``lr_scale`` multiplies
    every group's rate (``train --lr-scale``; a preset for a short run may raise it).
    """

    extent: float = 1.0              # set by the trainer from the scene
    max_steps: int = 30_000          # set by the trainer to the run's length
    means_lr_init: float = option(1.6e-4, "Means' learning rate at step 0, × the scene extent.",
                                  minimum=0.0)
    means_lr_final: float = option(1.6e-6, "Means' learning rate at the last step, × the extent.",
                                   minimum=0.0)
    means_lr_delay_mult: float = option(0.01, "3DGS's delay multiplier of the means' rate.",
                                        minimum=0.0)
    means_lr_delay_steps: int = option(0, "Steps of that delay (0: none).", minimum=0)
    sh_dc_lr: float = option(2.5e-3, "Learning rate of the SH DC coefficients.", minimum=0.0)
    sh_rest_lr: float = option(2.5e-3 / 20.0, "Learning rate of the higher SH coefficients.",
                               minimum=0.0)
    opacity_lr: float = option(0.025, "Learning rate of the opacity logits (the current upstream "
                                      "value; the 2023 release used 0.05).", minimum=0.0)
    scale_lr: float = option(5e-3, "Learning rate of the log-scales.", minimum=0.0)
    rotation_lr: float = option(1e-3, "Learning rate of the quaternions.", minimum=0.0)
    appearance_lr: float = option(
        1e-3, "Learning rate of the per-view colour transforms (--appearance), constant; Adam "
              "with β 0.9/0.999, ε 1e-8 (Inria's exposure optimiser decays 0.01 → 0.001).",
        minimum=0.0)
    appearance_centring: float = option(
        1.0, "Pull on the mean of the per-view colour transforms (--appearance) toward the "
             "identity: each view's update gets this times (mean − identity) on its gradient. "
             "The photos fix the model's colours only up to a map common to every view's "
             "transform; this keeps the model at the views' mean colours, which held-out views "
             "and every viewer see (0: free, as Inria's).", flag="--appearance-centring",
        minimum=0.0)
    pose_lr: float = option(
        1e-3, "Learning rate of the per-view pose corrections (--pose-opt), constant: radians for "
              "the rotation, × the scene extent for the translation; Adam with β 0.9/0.999, "
              "ε 1e-8.", flag="--pose-lr", minimum=0.0)
    beta1: float = option(0.9, "Adam β1.", minimum=0.0, maximum=1.0)
    beta2: float = option(0.999, "Adam β2.", minimum=0.0, maximum=1.0)
    eps: float = option(1e-15, "Adam ε.", minimum=0.0)
    # 3DGS's rates are paced for 30 000 steps: a shorter run may raise them (the fast preset
    # does, Fast.run_presets)
    lr_scale: float = option(1.0, "Multiply every learning rate (recorded in cfg.json).",
                             flag="--lr-scale", minimum=0.0, open_min=True)
    # at constant rates the model moves with the last views trained (mouse: 0.2 dB of held-out
    # PSNR in 100 steps); a few steps at lower rates settle it (docs/benchmarks.md). A fraction
    # of the run, so that a preset's cool-down fits any --iters
    cooldown_fraction: float = option(
        0.0, "Train this fraction of the run's steps, the last ones, at --cooldown-factor times "
             "every rate (0: off; the fast preset sets it).",
        flag="--cooldown-fraction", minimum=0.0, maximum=0.5)
    cooldown_factor: float = option(0.1, "The rates' factor over the cool-down.",
                                    flag="--cooldown-factor", minimum=0.0, maximum=1.0,
                                    open_min=True)

    def with_scene(self, extent: float, max_steps: int | None = None) -> "OptimConfig":
        """Copy for a scene of the given extent (and run length)."""
        return replace(self, extent=float(extent),
                       max_steps=self.max_steps if max_steps is None else int(max_steps))

    def for_batch(self, batch_size: int) -> "OptimConfig":
        """Copy for steps on batches of ``batch_size`` views, with gsplat's rules (its
        simple_trainer): every rate × sqrt(B) (the square-root scaling rule for Adam, Malladi et
        al. 2022), ``β ← 1 − B·(1 − β)`` for both moments (a moment then averages over as many
        views as before), ``eps ← eps / sqrt(B)``. The gradient is that of the batch's mean loss.
        B = 1 returns the configuration unchanged; B with ``B·(1 − β1) ≥ 1`` (10 for 3DGS's
        β1 = 0.9) is refused: the rule would give a non-positive β1."""
        b = int(batch_size)
        if b == 1:
            return self
        largest = max(1, math.ceil(1.0 / (1.0 - self.beta1) - 1e-9) - 1)
        if not 1 <= b <= largest:
            raise ValueError(f"batch size {batch_size}: must be 1..{largest} (gsplat's rule "
                             f"β1 ← 1 − B·(1 − β1) needs β1 > 0)")
        root = math.sqrt(b)
        return replace(self, lr_scale=self.lr_scale * root, eps=self.eps / root,
                       beta1=1.0 - b * (1.0 - self.beta1), beta2=1.0 - b * (1.0 - self.beta2))

    @property
    def cooldown_steps(self) -> int:
        """How many of the run's last steps ``cooldown_fraction`` cools (0: none)."""
        return int(round(self.max_steps * self.cooldown_fraction))

    def lr_for(self, group: str, step: float) -> float:
        """Learning rate of ``group`` (one of :data:`LR_GROUPS`) at schedule step ``step``.

        Only ``means`` is scheduled; the others are constant, as in 3DGS, but for the run's last
        :attr:`cooldown_steps`, where every rate is × ``cooldown_factor``.
        The trainer passes the 1-based iteration number, as 3DGS's
        ``update_learning_rate(iteration)`` does.
        """
        scale = self.lr_scale
        if self.cooldown_steps and step > self.max_steps - self.cooldown_steps:
            scale *= self.cooldown_factor
        if group == "means":
            return scale * expon_lr(
                step, self.means_lr_init * self.extent, self.means_lr_final * self.extent,
                self.max_steps, self.means_lr_delay_steps, self.means_lr_delay_mult)
        if group not in CONSTANT_RATES:
            hint = " (sh is split into sh_dc and sh_rest)" if group == "sh" else ""
            raise KeyError(f"unknown learning-rate group {group!r}{hint}; expected one of {LR_GROUPS}")
        return scale * getattr(self, CONSTANT_RATES[group])

    def lrs(self, step: float) -> dict[str, float]:
        """All group learning rates at ``step``, keyed by :data:`LR_GROUPS`."""
        return {g: self.lr_for(g, step) for g in LR_GROUPS}

    def bias_corrections(self, t: int) -> tuple[float, float]:
        """``(1 - β1^t, 1 - β2^t)`` for Adam step ``t`` (counted from 1)."""
        if t < 1:
            raise ValueError(f"Adam steps count from 1, got {t}")
        return 1.0 - self.beta1 ** t, 1.0 - self.beta2 ** t


@dataclass
class AdamState:
    """First and second moments (same shapes as the model) and the number of steps taken.

    One global step count, as PyTorch keeps one per parameter tensor and 3DGS never resets it when
    Gaussians are added or removed; new Gaussians start with zero moments.
    """

    m: GaussianModel
    v: GaussianModel
    step: int = 0

    @staticmethod
    def zeros_for(model: GaussianModel) -> "AdamState":
        """Fresh state for ``model`` (moments in the model's dtype)."""
        return AdamState(model.zeros_like(), model.zeros_like(), 0)

    def __len__(self) -> int:
        return len(self.m)

    def copy(self) -> "AdamState":
        return AdamState(self.m.copy(), self.v.copy(), self.step)

    def extend(self, n: int) -> "AdamState":
        """State with ``n`` zero rows appended, for Gaussians appended to the model (clone/split)."""
        if n < 0:
            raise ValueError(f"cannot extend by {n}")
        zeros = self.m.map(lambda a: np.zeros((n,) + a.shape[1:], dtype=a.dtype))
        return AdamState(GaussianModel.concatenate([self.m, zeros]),
                         GaussianModel.concatenate([self.v, zeros]), self.step)

    def select(self, index) -> "AdamState":
        """Rows ``index`` (bool mask or integer indices), matching ``model.subset(index)`` (prune)."""
        return AdamState(self.m.subset(index).copy(), self.v.subset(index).copy(), self.step)

    def reset_group(self, group: str) -> None:
        """Zero both moments of one stored array, as 3DGS does for opacity when it resets it."""
        if group not in PARAM_GROUPS:
            raise KeyError(f"unknown parameter group {group!r}; expected one of {PARAM_GROUPS}")
        getattr(self.m, group)[...] = 0
        getattr(self.v, group)[...] = 0

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat dict for ``np.savez`` checkpoints (``m.<group>``, ``v.<group>``, ``step``)."""
        out = {f"m.{k}": a for k, a in self.m.arrays().items()}
        out.update({f"v.{k}": a for k, a in self.v.arrays().items()})
        out["step"] = np.asarray(self.step, dtype=np.int64)
        return out

    @staticmethod
    def from_arrays(arrays) -> "AdamState":
        """Inverse of :meth:`to_arrays`."""
        m = GaussianModel(**{k: np.asarray(arrays[f"m.{k}"]) for k in PARAM_GROUPS})
        v = GaussianModel(**{k: np.asarray(arrays[f"v.{k}"]) for k in PARAM_GROUPS})
        return AdamState(m, v, int(arrays["step"]))


def adam_step(params: GaussianModel, grads: GaussianModel, state: AdamState, config: OptimConfig,
              lrs: dict[str, float] | None = None) -> dict[str, float]:
    """One Adam step, in place on ``params`` and ``state``; returns the learning rates used.

    ``state.step`` is incremented first and the step ``t`` it reaches is both the bias-correction
    exponent and the schedule step (``config.lrs(t)``) unless ``lrs`` is given. Every Gaussian is
    updated, including those with a zero gradient this step (their momentum still moves them), as
    dense PyTorch Adam does in 3DGS. Arithmetic stays in the parameters' dtype.
    """
    if len(grads) != len(params) or len(state) != len(params):
        raise ValueError(f"sizes differ: params {len(params)}, grads {len(grads)}, state {len(state)}")
    state.step += 1
    t = state.step
    if lrs is None:
        lrs = config.lrs(t)
    bc1, bc2 = config.bias_corrections(t)
    b1, b2 = config.beta1, config.beta2
    # Python floats (not NumPy float64 scalars) so that float32 arrays stay float32 under NEP 50.
    inv_bc1 = 1.0 / bc1
    bc2_sqrt = math.sqrt(bc2)
    for name in PARAM_GROUPS:
        p = getattr(params, name)
        g = getattr(grads, name)
        m = getattr(state.m, name)
        v = getattr(state.v, name)
        if g.shape != p.shape:
            raise ValueError(f"gradient of {name} has shape {g.shape}, parameter {p.shape}")
        # Same operation order as torch's single-tensor Adam: lerp, mul+addcmul, then addcdiv.
        m += (1.0 - b1) * (g - m)
        v *= b2
        v += (1.0 - b2) * (g * g)
        denom = np.sqrt(v)
        denom /= bc2_sqrt
        denom += config.eps
        if name == "sh":
            # Per-coefficient step size: DC row at the DC rate, the rest at the rest rate.
            step_size = np.full((p.shape[1], 1), lrs["sh_rest"] * inv_bc1, dtype=p.dtype)
            step_size[0] = lrs["sh_dc"] * inv_bc1
        else:
            step_size = lrs[name] * inv_bc1
        p -= step_size * (m / denom)
    return lrs
