"""GPU-vs-CPU gradient comparison: the ``gradcheck`` command and the tests share this code.

One step's gradients on a random scene (``random_scene``: edge cases included) are computed on the
device (:meth:`GpuTrainStep.gradients`) and by the NumPy reference in float64 from the same float32
parameters, and compared per group by the relative error ``‖g_gpu − g_ref‖ / ‖g_ref‖``
(docs/design.md §4: ≤ 1e-3). Groups: the loss value, the screen-space gradients of the
rasterisation backward (2D mean, conic, colour, opacity) and every stored parameter group, over the
whole model. The problems are built away from the points where the step is not differentiable
(the L1 kink, the forward pass's discrete decisions: :func:`make_problem`,
:func:`away_from_thresholds`), where the two paths may legitimately take different branches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..camera import Camera
from ..model import GaussianModel
from ..render_config import CLASSIC, RenderConfig
from .random_scene import filter_cameras, random_scene

TOLERANCE = 1e-3


@dataclass
class GroupError:
    group: str
    rel_error: float
    ref_norm: float
    tolerance: float = TOLERANCE

    @property
    def ok(self) -> bool:
        return bool(self.rel_error <= self.tolerance)


def rel_error(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """``(‖a − b‖ / ‖b‖, ‖b‖)``; an all-zero reference compares the absolute norm of ``a``."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    nb = float(np.linalg.norm(b))
    diff = float(np.linalg.norm(a - b))
    return (diff / nb if nb > 0 else diff), nb


L1_KINK_MARGIN = 1e-3


def _reference_args(model: GaussianModel, cam: Camera, config: RenderConfig) -> dict:
    """Render arguments of the reference for ``config``: antialiased, the 3D filter from the
    test cameras of :func:`~wgsl_splat.tools.random_scene.filter_cameras` (those a test hands the step)."""
    if not config.antialiased:
        return {}
    from ..reference import compute_filter_3d

    return dict(config=config, filter_3d=compute_filter_3d(model.means, filter_cameras(cam), config))


def away_from_thresholds(model: GaussianModel, cam: Camera, background, rng,
                         rounds: int = 6, config: RenderConfig = CLASSIC) -> GaussianModel:
    """``model`` with the few splats that sit on a discrete decision of the forward pass
    (:func:`threshold_splats`: an α at 1/255, a depth tie, a colour at its clamp ...) nudged off it:
    opacity logit +0.05 (or below the α clamp), DC colour +0.02, mean moved by ~1e-3. At such points float32 and float64
    may decide differently and the gradient jumps, so a comparison there measures the jump, not the
    kernels. Decided from the reference alone; the scene keeps all its edge cases."""
    from ..reference import render

    model = model.copy()
    for _ in range(rounds):
        m64 = model.astype(np.float64)
        flag = threshold_splats(render(m64, cam, background, **_reference_args(m64, cam, config)),
                                cam)
        if not flag.any():
            break
        k = int(flag.sum())
        # Opacities above the 0.99 clamp (logit > 4.6) leave α pinned at 0.99, and two such splats
        # stacked put T at 0.01² = 1e-4, exactly the stop: move those below the clamp instead.
        logits = model.opacity_logits[flag]
        model.opacity_logits[flag] = np.where(logits > 4.5, rng.uniform(3.0, 4.0, k),
                                              logits + 0.05).astype(logits.dtype)
        model.sh[flag, 0] += np.float32(0.02)
        model.means[flag] += rng.normal(0, 1e-3, (k, 3)).astype(model.means.dtype)
    return model


def make_problem(seed: int, n: int, width: int, height: int, sh_degree: int = 3,
                 edge_cases: bool = True, background=(0.0, 0.0, 0.0),
                 config: RenderConfig = CLASSIC,
                 opacity_logits: tuple[float, float] | None = None,
                 ) -> tuple[GaussianModel, Camera, np.ndarray]:
    """A random float32 model, a camera and a target image: the reference render of the same scene
    with perturbed means and colours (so the loss and its gradient are not trivial). In the
    antialiased mode the problem is made for the 3D filter of ``filter_cameras(camera)``.

    The L1 term has a kink where a rendered value equals its target; there float32 and float64
    may take different (equally valid) subgradients, ±(1-λ)/n per value, which near an opaque
    splat moved a gradient group by 1e-2 (seed 2086). Target values closer than
    ``L1_KINK_MARGIN`` to the reference render of ``model`` are therefore pushed to that distance,
    so the comparison is made where the loss is differentiable (decided from the reference alone);
    likewise the model is kept off the forward pass's discrete decisions (:func:`away_from_thresholds`).
    ``opacity_logits`` (low, high): every splat's opacity logit drawn from that range instead (a
    faint scene, whose pixels composite hundreds of splats).
    """
    from ..reference import render

    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, n=n, width=width, height=height, sh_degree=sh_degree,
                              edge_cases=edge_cases, dtype=np.float32)
    if opacity_logits is not None:
        model.opacity_logits[:] = rng.uniform(*opacity_logits, n).astype(np.float32)
    other = model.copy()
    other.means += rng.normal(0, 0.05, other.means.shape).astype(np.float32)
    other.sh[:, 0] += rng.normal(0, 0.3, other.sh[:, 0].shape).astype(np.float32)
    model = away_from_thresholds(model, cam, background, rng, config=config)
    o64, m64 = other.astype(np.float64), model.astype(np.float64)
    target = render(o64, cam, background, **_reference_args(o64, cam, config)).image
    image = render(m64, cam, background, **_reference_args(m64, cam, config)).image
    gap = target - image
    near = np.abs(gap) < L1_KINK_MARGIN
    target[near] = image[near] + np.where(gap[near] >= 0, L1_KINK_MARGIN, -L1_KINK_MARGIN)
    return model, cam, target.astype(np.float32)


SCREEN_GROUPS = (("screen mean2d", [0, 1]), ("screen opacity", [2]), ("screen conic", [3, 4, 5]),
                 ("screen colour", [6, 7, 8]))

# Relative closeness to a discrete decision of the forward pass: float32 and float64 alphas differ
# by ~1e-6 relative, accumulated transmittances by up to ~1e-5; 10x that is flagged.
THRESHOLD_MARGIN = 1e-5
T_MARGIN = 1e-4


def threshold_splats(out, camera: Camera, margin: float = THRESHOLD_MARGIN) -> np.ndarray:
    """(N,) bool: splats at a decision float32 and float64 may take differently, in the reference
    render ``out`` of ``camera``: a colour channel at the clamp at 0, the view-ray tangent at the
    Jacobian's frustum clamp, the depth at the near plane, or, in some pixel, α within ``margin``
    (relative) of 1/255 or of the 0.99 clamp, a power at 0, a transmittance near the 1e-4 stop, or
    a depth equal to another splat's of the tile to float32 resolution (their order may swap). A
    flipped decision changes the gradient by a finite amount (a whole pair's contribution), which
    in a small scene can exceed the comparison's bound; :func:`away_from_thresholds` moves the test
    problems off these points. Conservative (flags more than can flip); from the reference alone."""
    proj = out.proj
    cfg = proj.config
    tm = proj.terms
    # per splat: a colour channel at the max(·, 0) clamp (its gradient is masked below 0), the view
    # ray's tangent at the ±1.3·tan(half-fov) clamp of the Jacobian, the depth at the near plane
    flag = np.any(np.abs(tm["colors_raw"]) < margin, axis=1)
    for u, tan in (("ux", camera.tan_half_fov_x), ("uy", camera.tan_half_fov_y)):
        flag |= np.abs(np.abs(tm[u]) / (cfg.frustum_clamp * tan) - 1.0) < margin
    flag |= np.abs(proj.depths / cfg.near_plane - 1.0) < margin
    for tile in out.raster.structure.tiles:
        ids = tile.ids
        if len(ids) == 0:
            continue
        dx = (tile.pixel_x + 0.5)[:, None] - proj.means2d[ids, 0][None, :]
        dy = (tile.pixel_y + 0.5)[:, None] - proj.means2d[ids, 1][None, :]
        a, b, c = (proj.conics[ids, k][None, :] for k in range(3))
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        alpha_raw = proj.opacities[ids][None, :] * np.exp(np.minimum(power, 0.0))
        near = ((np.abs(alpha_raw / cfg.alpha_min - 1.0) < margin)
                | (np.abs(alpha_raw / cfg.alpha_max - 1.0) < margin) | (np.abs(power) < 1e-6))
        alpha = np.where(tile.composited, np.minimum(alpha_raw, cfg.alpha_max), 0.0)
        t_after = np.cumprod(1.0 - alpha, axis=1)
        cand = (power <= 0.0) & (np.minimum(alpha_raw, cfg.alpha_max) >= cfg.alpha_min)
        t_test = np.concatenate([np.ones_like(t_after[:, :1]), t_after[:, :-1]], axis=1) * \
            (1.0 - np.minimum(alpha_raw, cfg.alpha_max))
        near |= cand & (np.abs(t_test / cfg.t_min - 1.0) < T_MARGIN)
        flag[ids[near.any(axis=0)]] = True
        depth = proj.depths[ids]
        order = np.argsort(depth, kind="stable")
        tie = np.diff(depth[order]) <= 1e-6 * np.abs(depth[order][1:])
        flag[ids[order[1:][tie]]] = True
        flag[ids[order[:-1][tie]]] = True
    return flag


def compare(step, model: GaussianModel, cam: Camera, target: np.ndarray,
            active_sh_degree: int | None = None, tolerance: float = TOLERANCE) -> list[GroupError]:
    """Loss-driven comparison of one step's gradients (``step``: a GpuTrainStep holding ``model``)."""
    from ..reference import loss_and_grad, render, render_backward

    m64 = model.astype(np.float64)
    out = render(m64, cam, step.background, active_sh_degree=active_sh_degree, **_mode(step))
    loss, dimg, _ = loss_and_grad(out.image, target.astype(np.float64), step.loss_config.lambda_dssim)
    ref = render_backward(m64, cam, out, dimg)
    gpu = step.gradients(cam, target, active_sh_degree=active_sh_degree)
    errors = [GroupError("loss", abs(gpu.loss - loss) / max(abs(loss), 1e-30), abs(loss))]
    errors += _param_and_screen_errors(gpu, ref)
    for e in errors:
        e.tolerance = tolerance
    return errors


def compare_backward(step, model: GaussianModel, cam: Camera, dL_dimage: np.ndarray,
                     active_sh_degree: int | None = None) -> list[GroupError]:
    """The backward passes alone, from a given dL/dimage (no loss)."""
    from ..reference import render, render_backward

    m64 = model.astype(np.float64)
    out = render(m64, cam, step.background, active_sh_degree=active_sh_degree, **_mode(step))
    ref = render_backward(m64, cam, out, np.asarray(dL_dimage, np.float64))
    gpu = step.gradients(cam, dL_dimage=dL_dimage, active_sh_degree=active_sh_degree)
    return _param_and_screen_errors(gpu, ref)


def _mode(step) -> dict:
    """The reference's render arguments for the step's mode: its configuration and, antialiased,
    the very float32 3D filter the device holds."""
    f = step.filter_3d()
    return dict(config=step.render_config, filter_3d=None if f is None else f.astype(np.float64))


def _param_and_screen_errors(gpu, ref) -> list[GroupError]:
    sc = ref.screen
    ref_screen = np.column_stack([sc.means2d, sc.opacities, sc.conics, sc.colors])
    errors = []
    for name, cols in SCREEN_GROUPS:
        e, nb = rel_error(gpu.screen[:, cols], ref_screen[:, cols])
        errors.append(GroupError(name, e, nb))
    ref_params = ref.params.arrays()
    for name, arr in gpu.params.arrays().items():
        e, nb = rel_error(arr, ref_params[name])
        errors.append(GroupError(name, e, nb))
    return errors


def format_table(errors: list[GroupError]) -> str:
    lines = [f"{'group':<16} {'rel. error':>11} {'tolerance':>10}  result",
             "-" * 48]
    for e in errors:
        lines.append(f"{e.group:<16} {e.rel_error:>11.2e} {e.tolerance:>10.0e}  "
                     f"{'pass' if e.ok else 'FAIL'}")
    return "\n".join(lines)
