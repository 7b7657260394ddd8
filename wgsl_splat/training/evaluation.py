"""Held-out evaluation, computed as the 3DGS evaluation computes it.

3DGS's ``render.py`` saves every test render and its ground truth as 8-bit PNGs
(``torchvision.utils.save_image``: clip to [0, 1], ``floor(x·255 + 0.5)``) and ``metrics.py`` reads
those PNGs back. So the published figures are on 8-bit images: we quantise the render and the
ground truth the same way (:func:`wgsl_splat.data.images.to_u8`, the function that writes our PNGs)
before any metric, and the renders we save are exactly the images we scored.

Per view: PSNR (float64 MSE over all pixels and channels), SSIM (11×11 Gaussian window, σ 1.5, zero
padding, mean over pixels and channels: :func:`wgsl_splat.reference.loss.ssim`), L1 and, when the
optional ``lpips`` package (``pip install wgsl_splat[lpips]``) and its VGG weights are available,
LPIPS-VGG. The mean of each metric over the views is what 3DGS reports.

**Masks** (docs/captures.md): on a view with a mask the metrics skip its masked pixels. PSNR and L1
are over the unmasked pixels only; SSIM is the mean of the SSIM map over the unmasked pixels, the
map computed on both images with their masked pixels set to zero (as the training loss sees them:
a window that straddles the mask's edge compares zeros with zeros there); LPIPS (a network over the
whole image) sees the same zeroed images. The saved renders are not masked. A view whose mask
leaves no pixel has nothing to score: :func:`evaluate_views` skips it and says so.

**Colour-fitted score** (``colour_fit``: runs with ``--appearance``, ``eval --colour-fit``): the
per-view colour transforms a run learns for its training views do not exist for a held-out view,
and the model's colours are only fixed up to a common affine map of them, so the plain score pays
for that map. The half-view protocol of NeRF-W (and of Inria's exposure compensation) removes it
without fitting anything on the pixels it scores: per held-out view, the 3×4 affine colour map
``[A | b]`` from the (8-bit) render to the photo is fitted on the view's left half (columns
``< W // 2``; the model frozen), applied to the render, and PSNR / SSIM / L1 are taken on the right
half only (:func:`colour_fitted_metrics`). The fit minimises the L1 error, as the training loss
and Inria's exposure optimisation do, not the squared error: a least-squares map bends to the
render's worst pixels (a background the model never reconstructed) and carries that to the other
half — on three mouse runs without ``--appearance`` it scored the right halves 1.9–3.3 dB under no
map at all, the L1 map 0.7–1.7 dB less under, at every step (docs/benchmarks.md). Reported beside
the plain metrics as ``fit_psnr``, ``fit_ssim``, ``fit_l1``; the plain ones are unchanged.

LPIPS is expensive on a CPU (a VGG-16 per view), so the trainer asks for it only at the final
evaluation and the ``eval`` command always does; when it cannot be computed the result carries a
one-line ``lpips_note`` and nothing fails.

The renders are made one after another on the calling thread (the device is not shared between
threads); each view's metrics and PNG are host work (NumPy and zlib, which release the GIL) done by
a few worker threads while the next views render: at 800×800 they cost 0.4 s a view on the host of
an H100, 35 % of a fast lego run's wall time when done in line (docs/benchmarks.md, "GPU suite").
"""

from __future__ import annotations

import os
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..atomic_io import make_dirs, safe_file_stem, save_png
from ..contract.appearance import identity
from ..data.images import to_u8
from ..reference.loss import psnr, ssim, ssim_map

METRICS = ("psnr", "ssim", "l1")
FIT_METRICS = tuple(f"fit_{k}" for k in METRICS)


def quantised(img: np.ndarray) -> np.ndarray:
    """The image as its saved 8-bit PNG holds it, back in [0, 1] (float64)."""
    return to_u8(img).astype(np.float64) / 255.0


def image_metrics(render: np.ndarray, gt: np.ndarray, mask: np.ndarray | None = None) -> dict:
    """PSNR / SSIM / L1 of one view on the 8-bit quantised render and ground truth; with a mask
    ((H,W) bool, False = masked) over its unmasked pixels only (module doc)."""
    a, b = quantised(render), quantised(gt)
    if mask is None:
        return {"psnr": psnr(a, b), "ssim": ssim(a, b), "l1": float(np.mean(np.abs(a - b)))}
    keep = np.asarray(mask, bool)
    if not keep.any():
        raise ValueError("the view's mask leaves no pixel to score")
    a, b = zeroed(a, keep), zeroed(b, keep)
    return {"psnr": psnr(a[keep], b[keep]), "ssim": float(ssim_map(a, b)[keep].mean()),
            "l1": float(np.mean(np.abs(a[keep] - b[keep])))}


FIT_PIXELS = 1 << 14        # pixels a colour map is fitted on (evenly strided): 12 unknowns
FIT_ITERATIONS = 25
FIT_EPS = 1.0 / 255.0        # residual floor of the L1 weights: one 8-bit step


def fit_colour_map(render: np.ndarray, gt: np.ndarray,
                   keep: np.ndarray | None = None) -> np.ndarray:
    """The (3, 4) ``[A | b]`` minimising ``Σ |A·render + b − gt|`` (per channel, L1) over the pixels
    in ``keep`` ((H, W) bool; all without it), by iteratively reweighted least squares from the
    least-squares map (weights ``1 / max(|residual|, FIT_EPS)``), on at most ``FIT_PIXELS`` of them.
    A faint pull to the identity (1e-9 of the weight) makes a flat render (one colour: no unique
    ``A``) give the identity's nearest fit instead of failing."""
    c = render.reshape(-1, 3).astype(np.float64)
    y = gt.reshape(-1, 3).astype(np.float64)
    if keep is not None:
        k = np.asarray(keep, bool).reshape(-1)
        c, y = c[k], y[k]
    stride = max(1, -(-len(c) // FIT_PIXELS))
    c, y = c[::stride], y[::stride]
    x = np.concatenate([c, np.ones((len(c), 1))], axis=1)
    prior = identity(1)[0].T.astype(np.float64)               # W = [A | b]ᵀ, (4, 3)
    w = np.empty((4, 3))
    for ch in range(3):
        weight = np.ones(len(x))
        for _ in range(FIT_ITERATIONS):
            xw = x * weight[:, None]
            lam = 1e-9 * max(weight.sum(), 1e-12)
            w[:, ch] = np.linalg.solve(xw.T @ x + lam * np.eye(4),
                                       xw.T @ y[:, ch] + lam * prior[:, ch])
            weight = 1.0 / np.maximum(np.abs(y[:, ch] - x @ w[:, ch]), FIT_EPS)
    return w.T


def colour_fitted_metrics(render: np.ndarray, gt: np.ndarray,
                          mask: np.ndarray | None = None) -> dict:
    """``fit_psnr`` / ``fit_ssim`` / ``fit_l1`` of one view (module doc): the colour map fitted on
    the left half of the quantised render and photo, applied to the render, scored (8-bit, like
    :func:`image_metrics`, mask included) on the right half. With a mask, the fit uses the left
    half's unmasked pixels (the identity when it has none)."""
    a, b = quantised(render), quantised(gt)
    half = a.shape[1] // 2
    keep = None if mask is None else np.asarray(mask, bool)
    left = np.zeros(a.shape[:2], bool)
    left[:, :half] = True
    if keep is not None:
        left &= keep
    m = fit_colour_map(a, b, left) if left.any() else identity(1)[0]
    fitted = a[:, half:] @ m[:, :3].T + m[:, 3]
    right = image_metrics(fitted, b[:, half:], None if keep is None else keep[:, half:])
    return {f"fit_{k}": v for k, v in right.items()}


def zeroed(img: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """``img`` with the pixels outside ``keep`` set to 0 (``img`` itself without a mask)."""
    return img if keep is None else img * keep[..., None]


class Lpips:
    """LPIPS with the VGG network, as 3DGS's ``metrics.py`` (``lpips(..., net_type='vgg')``).

    3DGS passes images in [0, 1] to its LPIPS copy (``lpipsPyTorch``), whose VGG input layer expects
    [-1, 1]; we feed [0, 1] images the same way so the figure is comparable with theirs. Loaded on
    first use; :attr:`note` says why it is unavailable (package, torch or weights missing).
    """

    def __init__(self) -> None:
        self._model = None
        self._torch = None
        self.note: str | None = None
        self._tried = False

    def _load(self) -> bool:
        if self._tried:
            return self._model is not None
        self._tried = True
        try:
            import lpips  # noqa: PLC0415  (optional extra)
            import torch  # noqa: PLC0415
        except Exception as exc:  # noqa: BLE001 - ImportError, or a broken torch install
            self.note = (f"LPIPS not computed: the optional 'lpips' package is not usable "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                         f"pip install 'wgsl_splat[lpips]'")
            return False
        try:
            model = lpips.LPIPS(net="vgg", verbose=False)
            model.eval()
        except Exception as exc:  # noqa: BLE001 - typically the VGG weights cannot be downloaded
            self.note = (f"LPIPS not computed: the VGG weights could not be loaded "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            return False
        self._model, self._torch = model, torch
        return True

    @property
    def available(self) -> bool:
        return self._load()

    def __call__(self, render: np.ndarray, gt: np.ndarray,
                 mask: np.ndarray | None = None) -> float | None:
        if not self._load():
            return None
        torch = self._torch

        def tensor(img):
            img = zeroed(quantised(img), mask)
            return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)[None],
                                                         dtype=np.float32))

        with torch.no_grad():
            return float(self._model(tensor(render), tensor(gt)).item())


def held_out_views(dataset) -> list[int]:
    """The test views that are not also trained on. A scene too small for a split (one image, or
    fewer than two) trains on its "test" view too: a metric measured there is a training metric,
    never labelled held-out."""
    train = set(dataset.train_indices)
    return [i for i in dataset.test_indices if i not in train]


def evaluate_views(dataset, render_fn, out_dir: str, iteration: int, *,
                   lpips: Lpips | None = None, colour_fit: bool = False) -> dict:
    """Metrics on the held-out views (or up to 5 training views, labelled ``train``, when none is
    held out: :func:`held_out_views`), one view at
    a time (never all images resident); the 8-bit renders are saved under
    ``out_dir/<split>/iteration_K/`` with the view's file name.

    A view whose mask leaves no pixel is skipped and named in ``skipped``, the line and the
    protocol (a preloaded dataset has left it out already; ``eval`` does not preload); when that
    skips every held-out view the training views are scored, as a preloaded split would. When no
    view can be scored, ``views`` is 0, ``mean`` empty and the line says why.

    Returns ``dict(split, views, mean, per_view, skipped, lpips_note, protocol, seconds, line)``;
    ``mean`` and each ``per_view`` entry hold ``psnr``, ``ssim``, ``l1``, when an available
    ``lpips`` scorer is given ``lpips``, and with ``colour_fit`` the colour-fitted score
    (``fit_psnr``, ``fit_ssim``, ``fit_l1``: :func:`colour_fitted_metrics`).
    """
    t0 = time.perf_counter()
    held_out = held_out_views(dataset)
    candidates = [("test", held_out)] if held_out else []
    candidates.append(("train", dataset.train_indices[:: max(1, len(dataset.train_indices) // 5)][:5]))
    scorer = lpips if lpips is not None and lpips.available else None
    per_view, masked, skipped = {}, 0, []
    workers = eval_workers()
    pool = ThreadPoolExecutor(workers, thread_name_prefix="eval")
    try:
        for split, views in candidates:
            out = os.path.join(out_dir, split, f"iteration_{iteration}")
            pending = deque()            # (name, future), in view order; at most 2 per worker
            for i in views:
                cam = dataset.cameras[i]
                name = cam.name or f"view_{i:03d}"
                mask = dataset.load_mask(i) if hasattr(dataset, "load_mask") else None
                if mask is not None and not mask.any():
                    skipped.append(name)
                    continue
                gt = dataset.load_image(i)
                masked += mask is not None
                img = render_fn(cam)
                lp = scorer(img, gt, mask) if scorer is not None else None
                make_dirs(out)   # recorded: the run folder removes only what it wrote
                path = os.path.join(out, safe_file_stem(name, f"view_{i:03d}") + ".png")
                pending.append((name, pool.submit(_score_and_save, img, gt, mask, lp, path,
                                                  colour_fit)))
                while len(pending) > 2 * workers:
                    done, future = pending.popleft()
                    per_view[done] = future.result()
            while pending:
                done, future = pending.popleft()
                per_view[done] = future.result()
            if per_view:
                break
    finally:   # an interrupted evaluation writes no more PNGs than those already being written
        pool.shutdown(wait=True, cancel_futures=True)
    keys = (METRICS + (("lpips",) if scorer is not None else ())
            + (FIT_METRICS if colour_fit else ()))
    mean = {k: float(np.mean([v[k] for v in per_view.values()])) for k in keys} if per_view else {}
    gone = f"the mask of {_names(skipped)} leaves no pixel" if skipped else ""
    if not per_view:
        line = f"eval @ {iteration}: no view could be scored" + (f": {gone}" if gone else "")
    else:
        line = (f"eval @ {iteration} on {len(per_view)} {split} views: PSNR {mean['psnr']:.2f} dB, "
                f"SSIM {mean['ssim']:.4f}, L1 {mean['l1']:.4f}"
                + (f", LPIPS {mean['lpips']:.4f}" if "lpips" in mean else "")
                + (f"; colour fitted on the left halves, right halves: PSNR {mean['fit_psnr']:.2f} "
                   f"dB, SSIM {mean['fit_ssim']:.4f}" if colour_fit else ""))
    note = None
    if lpips is None:
        note = "LPIPS is computed at the final evaluation and by the eval command"
    elif scorer is None:
        note = lpips.note
    protocol = "8-bit quantised render and ground truth (as 3DGS's saved PNGs)"
    if colour_fit:
        protocol += ("; fit_*: right halves, a 3x4 colour map fitted on each view's left half "
                     "(L1)")
    if masked:
        protocol += f"; {masked} of {len(per_view)} views masked: scored on their unmasked pixels"
        line += f" ({masked} masked views: unmasked pixels only)"
    if skipped:
        protocol += f"; {len(skipped)} views skipped: {gone}"
        if per_view:
            line += f" ({len(skipped)} skipped: {gone})"
    return dict(split=split, views=len(per_view), mean=mean, per_view=per_view, skipped=skipped,
                lpips_note=note, protocol=protocol, seconds=time.perf_counter() - t0, line=line)


def eval_workers() -> int:
    """Threads for the views' metrics and PNGs: half the host's cores, 1 to 8."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def _score_and_save(img: np.ndarray, gt: np.ndarray, mask, lpips_value, path: str,
                    colour_fit: bool = False) -> dict:
    metrics = image_metrics(img, gt, mask)
    if colour_fit:
        metrics.update(colour_fitted_metrics(img, gt, mask))
    if lpips_value is not None:
        metrics["lpips"] = lpips_value
    save_png(path, img)
    return metrics


def _names(names: list[str], limit: int = 5) -> str:
    more = f", … ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
