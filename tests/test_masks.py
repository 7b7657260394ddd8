"""Masks (docs/design.md §2, docs/captures.md): masked pixels leave the loss on both paths, their
gradient is zero, the metrics skip them; the loaders find masks/ beside images/ and the alpha of
RGBA photos, and refuse masks of the wrong size or missing for some images."""

import numpy as np
import pytest

from wgsl_splat.gpu.loss import VARIANTS, GpuLoss
from wgsl_splat.gpu.pool import BufferPool
from wgsl_splat.reference.loss import MASKED, l1, loss_and_grad, masked_target, ssim
from wgsl_splat.tools.gradcheck import rel_error


def fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    return np.random.default_rng(seed), seed


def masked_pair(rng, shape):
    h, w, _ = shape
    gt = rng.uniform(0, 1, shape)
    img = np.clip(gt + rng.normal(0, 0.15, shape), 0, 1)
    diff = img - gt   # |img - gt| >= 1e-3: finite differences never straddle |·|'s kink
    img = np.where(np.abs(diff) < 1e-3, gt + np.where(diff < 0, -1e-3, 1e-3), img)
    mask = np.ones((h, w), bool)
    mask[h // 4: h // 2, w // 3:] = False            # a block, as a masked object
    mask[rng.uniform(size=(h, w)) < 0.1] = False     # and scattered pixels
    return img, gt, mask


def test_masked_loss_is_the_loss_of_the_zeroed_images_and_its_gradient_fd():
    rng, seed = fresh_rng()
    img, gt, mask = masked_pair(rng, (17, 21, 3))
    target = masked_target(gt, mask)
    assert np.all(target[~mask] == MASKED) and np.array_equal(target[mask], gt[mask])
    loss, grad, _ = loss_and_grad(img, target, lam=0.2)
    m = mask[..., None].astype(float)
    zi, zg = img * m, gt * m
    assert loss == pytest.approx(0.8 * l1(zi, zg) + 0.2 * (1 - ssim(zi, zg)), abs=1e-14)
    assert np.all(grad[~mask] == 0), f"seed={seed}"

    def f(x):
        return 0.8 * l1(x * m, zg) + 0.2 * (1 - ssim(x * m, zg))

    fd = np.zeros_like(img)
    h = 1e-5
    for idx in np.ndindex(img.shape):
        x = img.copy()
        x[idx] += h
        fp = f(x)
        x[idx] -= 2 * h
        fd[idx] = (fp - f(x)) / (2 * h)
    assert np.linalg.norm(fd - grad) / np.linalg.norm(grad) < 1e-6, f"seed={seed}"
    # Nothing masked: the unmasked loss exactly.
    l0, g0, _ = loss_and_grad(img, gt)
    l1_, g1, _ = loss_and_grad(img, masked_target(gt, np.ones(mask.shape, bool)))
    assert l0 == l1_ and np.array_equal(g0, g1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_masked_loss_matches_reference(gpu_ctx, variant):
    rng, seed = fresh_rng()
    img, gt, mask = masked_pair(rng, (37, 45, 3))
    target = masked_target(gt, mask).astype(np.float32)
    gpu = GpuLoss(gpu_ctx, BufferPool(gpu_ctx), variant=variant)
    loss, grad, parts = gpu.compute(img.astype(np.float32), target)
    ref_loss, ref_grad, ref_parts = loss_and_grad(img, target.astype(np.float64))
    assert abs(loss - ref_loss) <= 1e-5 * ref_loss, f"seed={seed}"
    assert abs(parts["ssim"] - ref_parts["ssim"]) <= 1e-5, f"seed={seed}"
    assert abs(parts["l1"] - ref_parts["l1"]) <= 1e-6, f"seed={seed}"
    assert np.all(grad[~mask] == 0), f"seed={seed}"
    assert rel_error(grad, ref_grad)[0] <= 1e-4, f"seed={seed}"
