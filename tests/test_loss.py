"""Loss of docs/design.md §2: SSIM against a direct 2D computation, gradients against finite differences."""

import math

import numpy as np
import pytest

from wgsl_splat.contract.losses import PARAM_TERMS
from wgsl_splat.reference.loss import (
    SSIM_C1,
    SSIM_C2,
    gaussian_window_1d,
    l1,
    loss_and_grad,
    psnr,
    ssim,
    ssim_map,
)


def _fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (2 ** 32))
    return np.random.default_rng(seed), seed


def _direct_ssim_map(img, gt, size=11, sigma=1.5):
    """Straightforward 2D version of 3DGS ``_ssim``: full 2D window, explicit zero padding."""
    g = gaussian_window_1d(size, sigma)
    w2 = np.outer(g, g)
    r = size // 2
    h, w, _ = img.shape

    def conv(a):
        p = np.pad(a, ((r, r), (r, r), (0, 0)))
        out = np.zeros_like(a)
        for i in range(size):
            for j in range(size):
                out += w2[i, j] * p[i:i + h, j:j + w]
        return out

    mu1, mu2 = conv(img), conv(gt)
    s11 = conv(img * img) - mu1 ** 2
    s22 = conv(gt * gt) - mu2 ** 2
    s12 = conv(img * gt) - mu1 * mu2
    return ((2 * mu1 * mu2 + SSIM_C1) * (2 * s12 + SSIM_C2)) / (
        (mu1 ** 2 + mu2 ** 2 + SSIM_C1) * (s11 + s22 + SSIM_C2))


def _pair(rng, shape):
    # A correlated pair, as during training (rendered image near the target), plus noise.
    gt = rng.uniform(0.0, 1.0, shape)
    img = np.clip(gt + rng.normal(0.0, 0.15, shape), 0.0, 1.0)
    # Keep |img - gt| >= 1e-3 so that finite differences never straddle the kink of |·|.
    diff = img - gt
    img = np.where(np.abs(diff) < 1e-3, gt + np.where(diff < 0, -1e-3, 1e-3), img)
    return img, gt


def _fd_grad(fn, x, h):
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        fp = fn(x)
        flat[i] = old - h
        fm = fn(x)
        flat[i] = old
        gflat[i] = (fp - fm) / (2 * h)
    return g


def test_window_matches_3dgs():
    g = gaussian_window_1d(11, 1.5)
    ref = np.array([math.exp(-(x - 5) ** 2 / (2 * 1.5 ** 2)) for x in range(11)])
    np.testing.assert_allclose(g, ref / ref.sum(), rtol=1e-15)
    assert g.dtype == np.float64 and abs(g.sum() - 1) < 1e-15


@pytest.mark.parametrize("shape", [(20, 23, 3), (37, 17, 3), (7, 5, 3), (40, 33, 1)])
def test_ssim_matches_direct_2d(shape):
    rng, seed = _fresh_rng()
    img, gt = _pair(rng, shape)
    ref = _direct_ssim_map(img, gt)
    np.testing.assert_allclose(ssim_map(img, gt), ref, rtol=0, atol=1e-12, err_msg=f"seed={seed}")
    assert abs(ssim(img, gt) - ref.mean()) < 1e-12, f"seed={seed}"


def test_ssim_identity_and_dtype():
    rng, seed = _fresh_rng()
    x = rng.uniform(0, 1, (31, 26, 3))
    assert abs(ssim(x, x) - 1.0) < 1e-12, f"seed={seed}"
    x32 = x.astype(np.float32)
    assert abs(ssim(x32, x32) - 1.0) < 1e-5, f"seed={seed}"
    img, gt = _pair(rng, (31, 26, 3))
    assert ssim_map(img.astype(np.float32), gt.astype(np.float32)).dtype == np.float32
    assert abs(ssim(img.astype(np.float32), gt.astype(np.float32)) - ssim(img, gt)) < 1e-5


@pytest.mark.parametrize("lam", [1.0, 0.0, 0.2])
def test_gradient_finite_differences(lam):
    """lam=1 isolates the SSIM part, lam=0 the L1 part, 0.2 is the training loss."""
    rng, seed = _fresh_rng()
    img, gt = _pair(rng, (20, 23, 3))
    loss, grad, parts = loss_and_grad(img, gt, lam=lam)
    assert grad.shape == img.shape and grad.dtype == np.float64
    assert abs(loss - ((1 - lam) * parts["l1"] + lam * (1 - parts["ssim"]))) < 1e-15
    assert abs(parts["l1"] - l1(img, gt)) < 1e-15 and abs(parts["ssim"] - ssim(img, gt)) < 1e-15
    # L1 is piecewise linear and _pair keeps |img-gt| >= 1e-3 > h, so its central differences are
    # exact up to rounding; SSIM is smooth and h = 1e-5 balances truncation against rounding.
    h = 1e-6 if lam == 0.0 else 1e-5
    # Loss only (no gradient) for the 2·H·W·C evaluations; the SSIM term is skipped when unused.
    fd = _fd_grad(lambda x: (1 - lam) * l1(x, gt) + (lam * (1 - ssim(x, gt)) if lam else 0.0),
                  img.copy(), h)
    rel = np.linalg.norm(fd - grad) / np.linalg.norm(grad)
    assert rel < 1e-6, f"seed={seed} lam={lam} rel={rel:.3e}"


def test_gradient_zero_at_optimum_and_float32():
    rng, seed = _fresh_rng()
    img, gt = _pair(rng, (24, 30, 3))
    loss, grad, parts = loss_and_grad(gt, gt)
    assert abs(loss) < 1e-12 and np.abs(grad).max() < 1e-12, f"seed={seed}"
    l64, g64, _ = loss_and_grad(img, gt)
    l32, g32, _ = loss_and_grad(img.astype(np.float32), gt.astype(np.float32))
    assert g32.dtype == np.float32
    assert abs(l32 - l64) < 1e-5
    assert np.linalg.norm(g32 - g64) / np.linalg.norm(g64) < 1e-4, f"seed={seed}"


def test_psnr_known_values():
    gt = np.full((8, 9, 3), 0.5)
    assert psnr(gt + 0.1, gt) == pytest.approx(20.0, abs=1e-9)    # mse 1e-2
    assert psnr(gt - 0.01, gt) == pytest.approx(40.0, abs=1e-9)   # mse 1e-4
    assert psnr(gt, gt) == math.inf
    assert psnr((gt + 0.1) * 255, gt * 255, max_val=255.0) == pytest.approx(20.0, abs=1e-9)
    img = gt.copy()
    img[0, 0, 0] += 1.0  # one pixel off by 1: mse = 1 / 216
    assert psnr(img, gt) == pytest.approx(10 * math.log10(216), abs=1e-9)


def test_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        loss_and_grad(np.zeros((4, 5, 3)), np.zeros((5, 4, 3)))


@pytest.mark.parametrize("term", PARAM_TERMS, ids=lambda t: t.weight)
def test_each_parameter_terms_derivative_matches_finite_differences(term):
    """Every declared parameter term's NumPy derivative (the device code is generated from the same
    declaration and compared with it in test_gpu_state.py) against central differences, over
    logits and log-scales from −12 to 12 (saturated sigmoids included)."""
    rng, seed = _fresh_rng()
    x = np.concatenate([rng.uniform(-12.0, 12.0, 200), [0.0, -1e-3, 1e-3]])
    h = 1e-6
    f, df = term.numpy(x)
    fd = (term.numpy(x + h)[0] - term.numpy(x - h)[0]) / (2 * h)
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(df)), f"seed={seed}"
    np.testing.assert_allclose(df, fd, rtol=1e-6, atol=1e-8, err_msg=f"seed={seed}")


def test_the_opacity_entropy_is_the_binary_entropy_of_the_opacity():
    """H(p) = −p ln p − (1 − p) ln(1 − p), largest (ln 2) at p = ½ and 0 at either end: the
    term costs semi-transparent Gaussians and pulls them to opaque or transparent."""
    term = next(t for t in PARAM_TERMS if t.weight == "opacity_entropy")
    assert term.group == "opacity_logits"
    p = np.array([0.01, 0.2, 0.5, 0.9, 0.999])
    x = np.log(p / (1 - p))
    value, slope = term.numpy(x)
    np.testing.assert_allclose(value, -p * np.log(p) - (1 - p) * np.log(1 - p), rtol=1e-12)
    assert value[2] == pytest.approx(math.log(2)) and np.all(value[[0, 4]] < 0.06)
    assert slope[0] > 0 and slope[2] == 0 and slope[3] < 0    # gradient descent moves away from ½
    hi = term.numpy(np.array([80.0, -80.0]))[0]                # no overflow where σ saturates
    assert np.all(np.isfinite(hi)) and np.all(hi < 1e-30)
