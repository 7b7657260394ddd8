"""GPU-vs-CPU gradient comparison: the ``gradcheck`` command and the tests share this code.

One step's gradients on a random scene (``random_scene``: edge cases included) are computed on the
device (:meth:`GpuTrainStep.gradients`) and by the NumPy reference in float64 from the same float32
parameters, and compared per group by the relative error ``‖g_gpu − g_ref‖ / ‖g_ref‖``
(DESIGN.md §4: ≤ 1e-3). Groups: the loss value, dL/dimage, the screen-space gradients of the
rasterisation backward (2D mean, conic, colour, opacity) and every stored parameter group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .camera import Camera
from .model import GaussianModel
from .random_scene import random_scene

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


def make_problem(seed: int, n: int, width: int, height: int, sh_degree: int = 3,
                 edge_cases: bool = True, background=(0.0, 0.0, 0.0)
                 ) -> tuple[GaussianModel, Camera, np.ndarray]:
    """A random float32 model, a camera and a target image: the reference render of the same scene
    with perturbed means and colours (so the loss and its gradient are not trivial).

    The L1 term has a kink where a rendered value equals its target; there float32 and float64
    may take different (equally valid) subgradients, ±(1-λ)/n per value, which near an opaque
    splat moved a gradient group by 1e-2 (seed 2086). Target values closer than
    ``L1_KINK_MARGIN`` to the reference render of ``model`` are therefore pushed to that distance,
    so the comparison is made where the loss is differentiable (decided from the reference alone).
    """
    from .reference import render

    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, n=n, width=width, height=height, sh_degree=sh_degree,
                              edge_cases=edge_cases, dtype=np.float32)
    other = model.copy()
    other.means += rng.normal(0, 0.05, other.means.shape).astype(np.float32)
    other.sh[:, 0] += rng.normal(0, 0.3, other.sh[:, 0].shape).astype(np.float32)
    target = render(other.astype(np.float64), cam, background).image
    image = render(model.astype(np.float64), cam, background).image
    gap = target - image
    near = np.abs(gap) < L1_KINK_MARGIN
    target[near] = image[near] + np.where(gap[near] >= 0, L1_KINK_MARGIN, -L1_KINK_MARGIN)
    return model, cam, target.astype(np.float32)


SCREEN_GROUPS = (("screen mean2d", [0, 1]), ("screen opacity", [2]), ("screen conic", [3, 4, 5]),
                 ("screen colour", [6, 7, 8]))


def compare(step, model: GaussianModel, cam: Camera, target: np.ndarray,
            active_sh_degree: int | None = None, tolerance: float = TOLERANCE) -> list[GroupError]:
    """Loss-driven comparison of one step's gradients (``step``: a GpuTrainStep holding ``model``)."""
    from .reference import loss_and_grad, render, render_backward

    m64 = model.astype(np.float64)
    out = render(m64, cam, step.background, active_sh_degree=active_sh_degree)
    loss, dimg, _ = loss_and_grad(out.image, target.astype(np.float64), step.lambda_dssim)
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
    from .reference import render, render_backward

    m64 = model.astype(np.float64)
    out = render(m64, cam, step.background, active_sh_degree=active_sh_degree)
    ref = render_backward(m64, cam, out, np.asarray(dL_dimage, np.float64))
    gpu = step.gradients(cam, dL_dimage=dL_dimage, active_sh_degree=active_sh_degree)
    return _param_and_screen_errors(gpu, ref)


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
