"""The training loss, declared once for both paths.

``loss = (1 − λ)·L1 + λ·(1 − SSIM)`` of the rendered image against the view (the image terms:
``reference/loss.py`` and ``gpu/shaders/loss*.wgsl``), plus **parameter terms**: a weight times the
mean over a parameter group of an elementwise function (gsplat's ``opacity_reg`` and ``scale_reg``,
which 3DGS-MCMC uses; an opacity entropy). A parameter term is one :class:`ParamTerm` in
:data:`PARAM_TERMS` holding both of its parts — the NumPy function and its derivative, and the
same in WGSL — and its weight is one field of :class:`LossConfig`, which is an option of the
``train`` command. The NumPy step and the device step both report ``image loss + parameter
terms`` (the device sums the terms' values in ``project_backward.wgsl`` and adds them to its loss
ring).

To add a parameter term: a weight field in :class:`LossConfig` and a :class:`ParamTerm` below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..options import default_of, option

IMAGE_LOSS = "(1 − λ)·L1 + λ·(1 − SSIM)"


@dataclass
class LossConfig:
    """The training loss (module doc)."""

    lambda_dssim: float = option(
        0.2, "λ, the weight of (1 − SSIM) against L1 in the image loss (3DGS: 0.2).",
        flag="--lambda-dssim", minimum=0.0, maximum=1.0)
    opacity_reg: float = option(
        0.0, "Weight of the mean-opacity regulariser, weight · mean σ(logit) (gsplat's opacity_reg).",
        flag="--opacity-reg", minimum=0.0)
    scale_reg: float = option(
        0.0, "Weight of the mean-scale regulariser, weight · mean exp(log-scale) (gsplat's "
             "scale_reg).", flag="--scale-reg", minimum=0.0)
    opacity_entropy: float = option(
        0.0, "Weight of the opacity-entropy regulariser, weight · mean H(σ(logit)) with "
             "H(p) = −p·ln p − (1−p)·ln(1−p): each Gaussian is pushed to opaque or transparent, "
             "so semi-transparent haze costs.", flag="--opacity-entropy", minimum=0.0)

    def active_terms(self) -> list[tuple["ParamTerm", float]]:
        """The parameter terms with a non-zero weight, with their weights."""
        return [(t, getattr(self, t.weight)) for t in PARAM_TERMS if getattr(self, t.weight) != 0.0]


@dataclass(frozen=True)
class ParamTerm:
    """``weight · mean over the elements of a parameter group of f(x)``.

    ``numpy(x)`` returns ``(f(x), f'(x))`` in float64; ``wgsl`` is the body of a WGSL function of
    ``x: f32`` returning ``vec2<f32>(f(x), f'(x))`` (the device step generates its code from it)."""

    weight: str                 # the LossConfig field holding the weight
    group: str                  # the parameter group (GaussianModel attribute)
    numpy: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    wgsl: str


# The image loss's constants (3DGS's ``utils/loss_utils.py``), shared by both paths' SSIM.
SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
SSIM_C1 = 0.01 ** 2
SSIM_C2 = 0.03 ** 2
DEFAULT_LAMBDA = default_of(LossConfig, "lambda_dssim")   # 3DGS's λ, declared once there


def gaussian_window_1d(size: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> np.ndarray:
    """Normalised 1D Gaussian window (float64), centred on ``size // 2`` as in 3DGS."""
    x = np.arange(size, dtype=np.float64) - size // 2
    g = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return g / g.sum()


MASKED = -1.0   # the target value of a masked pixel channel (both paths test ``gt < 0``)


def masked_target(image: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``image`` (H, W, C) with :data:`MASKED` where ``mask`` (H, W) is False (a copy; the image
    itself when there is no mask)."""
    if mask is None:
        return image
    out = np.array(image, copy=True)
    out[~np.asarray(mask, bool)] = MASKED
    return out


def pixel_errors(image: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Each pixel's error ``mean_c |image − target|`` (H, W), 0 where the target is masked, in
    the inputs' precision: the fast mode's error maps (:mod:`~wgsl_splat.contract.error_maps`)
    and, averaged, the loss's L1 term (:func:`l1_term`); ``error_maps.wgsl`` on the device."""
    e = np.abs(image - target).mean(axis=2)
    e[(target < 0).any(axis=2)] = 0.0
    return e


def l1_term(image: np.ndarray, target: np.ndarray) -> float:
    """The loss's L1 term of ``image`` against ``target`` (both paths' loss): the mean absolute
    error over every pixel channel, a masked pixel counting as zero."""
    gt = np.asarray(target, np.float64)
    return float(pixel_errors(np.asarray(image, np.float64), gt).mean()) if gt.size else 0.0


def _sigmoid_term(x):
    s = 1.0 / (1.0 + np.exp(-x))
    return s, s * (1.0 - s)


def _exp_term(x):
    e = np.exp(x)
    return e, e


def _entropy_term(x):
    # H(σ(x)) = σ·softplus(−x) + (1−σ)·softplus(x) (ln σ = −softplus(−x)); dH/dx = −x·σ(1−σ)
    s = 1.0 / (1.0 + np.exp(-x))
    sp = np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    return s * (sp - x) + (1.0 - s) * sp, -x * s * (1.0 - s)


PARAM_TERMS: tuple[ParamTerm, ...] = (
    ParamTerm("opacity_reg", "opacity_logits", _sigmoid_term,
              "let s = 1.0 / (1.0 + exp(-x));\n    return vec2<f32>(s, s * (1.0 - s));"),
    ParamTerm("scale_reg", "log_scales", _exp_term,
              "let e = exp(x);\n    return vec2<f32>(e, e);"),
    ParamTerm("opacity_entropy", "opacity_logits", _entropy_term,
              "let s = 1.0 / (1.0 + exp(-x));\n"
              "    let sp = max(x, 0.0) + log(1.0 + exp(-abs(x)));\n"
              "    return vec2<f32>(s * (sp - x) + (1.0 - s) * sp, -x * s * (1.0 - s));"),
)


def param_terms_numpy(config: LossConfig, model, grads) -> float:
    """The parameter terms' value at ``model``; their gradients added to ``grads`` (in place)."""
    total = 0.0
    for term, weight in config.active_terms():
        x = getattr(model, term.group).astype(np.float64)
        if x.size == 0:
            continue
        value, slope = term.numpy(x)
        g = getattr(grads, term.group)
        g += (weight / x.size * slope).astype(g.dtype)
        total += weight * float(value.mean())
    return total
