"""Photometric loss of docs/design.md §2 and its analytic gradient with respect to the rendered image.

``L = (1-λ)·L1 + λ·(1 - SSIM)`` with λ = 0.2, exactly as the original 3DGS
(``utils/loss_utils.py``): L1 is the mean absolute error; SSIM uses an 11×11 Gaussian window
(σ = 1.5), C1 = 0.01², C2 = 0.03², is computed per channel with zero padding and "same"-size output
(``F.conv2d(padding=window//2)``), then averaged over every pixel and channel.

**Masks** (docs/design.md §2): a target value below zero (:data:`MASKED`) marks a masked pixel
channel; :func:`masked_target` makes such a target. The loss is that of ``m·img`` against ``m·gt``
(both zeroed where masked), still averaged over every pixel and channel, so a masked pixel adds
nothing to L1, sits in a window of zeros for SSIM and gets a zero gradient: ``dL/dimg = m·dL/dimg'``.

Images are ``(H, W, C)`` arrays (C = 3 for RGB) with values in [0, 1]. Every function keeps the
floating dtype of its input (float32 stays float32, float64 stays float64) so that the float64 path
can be checked against finite differences and the float32 path matches the GPU kernels.

The 2D window is the outer product of a 1D Gaussian, so every window sum is a horizontal then a
vertical 1D pass. Each pass is written as a block-Toeplitz matrix product: that keeps the work in
BLAS and is several times faster than summing 11 shifted copies of the image in NumPy.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..contract.losses import (
    DEFAULT_LAMBDA,
    SSIM_C1,
    SSIM_C2,
    gaussian_window_1d,
)

# Output block of the block-Toeplitz passes: each block of _BLOCK outputs reads _BLOCK + window - 1
# inputs. 16 measured fastest at 490×273 (float32 and float64) on a 2-core Xeon.
_BLOCK = 16


def _apply_mask(img: np.ndarray, gt: np.ndarray):
    """``(m·img, m·gt, m)`` with ``m`` (H, W, C) of 0/1 from the target's sign; ``m`` None when
    nothing is masked."""
    keep = gt >= 0
    if keep.all():
        return img, gt, None
    m = keep.astype(img.dtype)
    return img * m, gt * m, m


def _toeplitz(g: np.ndarray, block: int) -> np.ndarray:
    """(block, block + len(g) - 1) matrix whose row i holds ``g`` starting at column i."""
    k = len(g)
    t = np.zeros((block, block + k - 1), dtype=g.dtype)
    rows = np.arange(block)[:, None]
    t[rows, rows + np.arange(k)[None, :]] = g
    return t


def _filter_last(a: np.ndarray, t: np.ndarray, radius: int) -> np.ndarray:
    """'Same' zero-padded correlation along the last axis, using the block-Toeplitz matrix ``t``."""
    block = t.shape[0]
    n = a.shape[-1]
    nb = -(-n // block)
    lead = a.shape[:-1]
    p = np.zeros(lead + (nb * block + 2 * radius,), dtype=a.dtype)
    p[..., radius:radius + n] = a
    s = p.strides
    # Overlapping windows (read-only view): window j covers padded columns [j·block, j·block+block+2r).
    w = as_strided(p, lead + (nb, block + 2 * radius), s[:-1] + (block * s[-1], s[-1]),
                   writeable=False)
    out = w @ t.T
    return out.reshape(lead + (nb * block,))[..., :n]


def _filter_rows(a: np.ndarray, t: np.ndarray, radius: int) -> np.ndarray:
    """'Same' zero-padded correlation along axis -2 of a ``(..., H, W)`` array."""
    block = t.shape[0]
    n, m = a.shape[-2], a.shape[-1]
    nb = -(-n // block)
    lead = a.shape[:-2]
    p = np.zeros(lead + (nb * block + 2 * radius, m), dtype=a.dtype)
    p[..., radius:radius + n, :] = a
    s = p.strides
    # Each window is a C-contiguous (block+2r, W) slab, so every product is one BLAS gemm.
    w = as_strided(p, lead + (nb, block + 2 * radius, m), s[:-2] + (block * s[-2], s[-2], s[-1]),
                   writeable=False)
    out = t @ w
    return out.reshape(lead + (nb * block, m))[..., :n, :]


def gaussian_blur(a: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
    """Separable window sum over the last two axes of ``(..., H, W)``: horizontal then vertical,
    zero padding, same-size output. The kernel is symmetric, so this is also its own adjoint."""
    if g is None:
        g = gaussian_window_1d()
    g = np.asarray(g, dtype=a.dtype)
    r = len(g) // 2
    t = _toeplitz(g, _BLOCK)
    return _filter_rows(_filter_last(a, t, r), t, r)


def _check_pair(img: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    img = np.asarray(img)
    if not np.issubdtype(img.dtype, np.floating):
        img = img.astype(np.float64)
    gt = np.asarray(gt, dtype=img.dtype)
    if img.shape != gt.shape or img.ndim != 3:
        raise ValueError(f"img and gt must both be (H, W, C); got {img.shape} and {gt.shape}")
    return img, gt


def _ssim_terms(img: np.ndarray, gt: np.ndarray):
    """Window statistics in channel-major (C, H, W) layout; shared by ssim_map and the gradient."""
    x = img.transpose(2, 0, 1)
    y = gt.transpose(2, 0, 1)
    # One stacked blur for all five statistics: fewer, larger BLAS calls.
    stats = gaussian_blur(np.stack([x, y, x * x, y * y, x * y]))
    mu1, mu2, e11, e22, e12 = stats
    c1 = img.dtype.type(SSIM_C1)
    c2 = img.dtype.type(SSIM_C2)
    mu1_mu2 = mu1 * mu2
    a1 = 2 * mu1_mu2 + c1
    a2 = 2 * (e12 - mu1_mu2) + c2
    b1 = mu1 * mu1 + mu2 * mu2 + c1
    b2 = (e11 - mu1 * mu1) + (e22 - mu2 * mu2) + c2
    return x, y, mu1, mu2, a1, a2, b1, b2


def ssim_map(img: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Per-pixel, per-channel SSIM, shape (H, W, C)."""
    img, gt = _check_pair(img, gt)
    _, _, _, _, a1, a2, b1, b2 = _ssim_terms(img, gt)
    return np.ascontiguousarray(((a1 * a2) / (b1 * b2)).transpose(1, 2, 0))


def ssim(img: np.ndarray, gt: np.ndarray) -> float:
    """Mean SSIM over all pixels and channels (3DGS ``ssim`` with size_average=True)."""
    img, gt = _check_pair(img, gt)
    _, _, _, _, a1, a2, b1, b2 = _ssim_terms(img, gt)
    return float(np.mean((a1 * a2) / (b1 * b2), dtype=np.float64))


def l1(img: np.ndarray, gt: np.ndarray) -> float:
    """Mean absolute error over all pixels and channels."""
    img, gt = _check_pair(img, gt)
    return float(np.mean(np.abs(img - gt), dtype=np.float64))


def psnr(img: np.ndarray, gt: np.ndarray, max_val: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB for images in [0, max_val]; ``inf`` when identical.

    Computed in float64 over all pixels and channels of one image, as 3DGS's per-image ``psnr``."""
    img = np.asarray(img, dtype=np.float64)
    gt = np.asarray(gt, dtype=np.float64)
    if img.shape != gt.shape:
        raise ValueError(f"shape mismatch: {img.shape} vs {gt.shape}")
    mse = float(np.mean((img - gt) ** 2))
    if mse == 0.0:
        return math.inf
    return 10.0 * math.log10(max_val * max_val / mse)


def loss_and_grad(img: np.ndarray, gt: np.ndarray, lam: float = DEFAULT_LAMBDA
                  ) -> tuple[float, np.ndarray, dict]:
    """Loss ``(1-λ)·L1 + λ·(1 - SSIM)`` and its gradient with respect to ``img``.

    Target values below zero are masked (module doc). Returns ``(loss, dL_dimg, parts)``: ``dL_dimg`` has the shape and dtype of ``img``; ``parts`` is
    ``{"l1": float, "ssim": float}``. The subgradient of |x| at 0 is taken as 0 (``np.sign``).
    """
    img, gt = _check_pair(img, gt)
    img, gt, m = _apply_mask(img, gt)
    dt = img.dtype.type
    x, y, mu1, mu2, a1, a2, b1, b2 = _ssim_terms(img, gt)
    inv_b = 1 / (b1 * b2)
    s = a1 * a2 * inv_b
    count = s.size
    ssim_val = float(np.mean(s, dtype=np.float64))
    diff = img - gt
    l1_val = float(np.mean(np.abs(diff), dtype=np.float64))
    loss = (1.0 - lam) * l1_val + lam * (1.0 - ssim_val)

    # SSIM as a function of the window sums m1 = G*x, e11 = G*x², e12 = G*(x·y), using
    # σ1² = e11 - m1², σ12 = e12 - m1·m2 (the chain rule through σ's dependence on m1 included):
    #   ∂s/∂e11 = -s/B2,   ∂s/∂e12 = 2·A1/(B1·B2),
    #   ∂s/∂m1  = 2·m2·A2/(B1·B2) - 2·m1·s/B1 - 2·m1·∂s/∂e11 - m2·∂s/∂e12.
    d_e11 = -s / b2
    d_e12 = 2 * a1 * inv_b
    d_m1 = 2 * mu2 * a2 * inv_b - 2 * mu1 * s / b1 - 2 * mu1 * d_e11 - mu2 * d_e12
    # Back through the window sums: the adjoint of a zero-padded 'same' correlation with a
    # symmetric kernel is the same correlation, so one more stacked blur does it.
    bm1, be11, be12 = gaussian_blur(np.stack([d_m1, d_e11, d_e12]))
    d_ssim = bm1 + 2 * x * be11 + y * be12  # (C, H, W); ∂(Σ s)/∂x

    grad = dt(-lam / count) * d_ssim.transpose(1, 2, 0)
    grad += dt((1.0 - lam) / count) * np.sign(diff)
    if m is not None:
        grad *= m
    return loss, np.ascontiguousarray(grad, dtype=img.dtype), {"l1": l1_val, "ssim": ssim_val}
