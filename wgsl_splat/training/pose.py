"""Camera pose refinement (``--pose-opt``, gsplat's ``pose_opt``; docs/captures.md): a 6-DoF
correction of every training view's pose, learned with the model.

A view's correction is ``δ = (τ, ω)``: a translation τ and an axis-angle rotation ω (radians), both
in camera axes, applied to the loaded world-to-camera matrix ``W = [R | t]`` as ``W' = Δ·W`` with
``Δ = [exp(ω) | τ]``, so ``R' = exp(ω)·R`` and ``t' = exp(ω)·t + τ``. δ = 0 is the loaded pose.

Gradients: the projection's backward pass gives ``dL/dR'`` and ``dL/dt'`` (the 3×4 view-matrix
gradient, ``reference/projection.py:view_matrix_grad``); then ``dL/dτ = dL/dt'``,
``dL/dexp(ω) = dL/dR'·Rᵀ + dL/dt'·tᵀ`` and ``dL/dω_k = Σ dL/dexp(ω) ⊙ ∂exp(ω)/∂ω_k`` (Gallego &
Yezzi's closed form of the Rodrigues derivative). Each view's δ is updated by Adam (PyTorch's,
ε = 1e-8) right after its view's backward pass, with its own step count; the rotation's rate is
``pose_lr``, the translation's ``pose_lr × scene extent`` (world units, as the means' rate).

Training-only: the PLY is the standard layout, and held-out views keep their loaded poses (nothing
is fitted on a test view).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..camera import Camera
from .appearance import adam_scalars

POSE_EPS = 1e-8
BETA1, BETA2 = 0.9, 0.999   # PyTorch Adam's defaults, as gsplat's pose optimiser
FLOATS = 6                  # τ (3), ω (3)


def hat(v: np.ndarray) -> np.ndarray:
    """The cross-product matrix [v]× of a 3-vector."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def so3_exp(w: np.ndarray) -> np.ndarray:
    """Rodrigues: the rotation matrix of axis-angle ``w`` (float64)."""
    w = np.asarray(w, np.float64)
    theta = float(np.linalg.norm(w))
    k = hat(w)
    if theta < 1e-8:   # second order: exact to rounding at these angles
        return np.eye(3) + k + 0.5 * k @ k
    return (np.eye(3) + np.sin(theta) / theta * k
            + (1.0 - np.cos(theta)) / theta ** 2 * k @ k)


def so3_exp_jacobian(w: np.ndarray) -> np.ndarray:
    """``∂exp(w)/∂w_k`` (3, 3, 3), k first: ``(w_k [w]× + [w × (I − R) e_k]×) / |w|² · R``
    (Gallego & Yezzi 2015), ``[e_k]×`` at w = 0."""
    w = np.asarray(w, np.float64)
    t2 = float(w @ w)
    eye = np.eye(3)
    if t2 < 1e-16:
        return np.stack([hat(eye[k]) for k in range(3)])
    r = so3_exp(w)
    return np.stack([(w[k] * hat(w) + hat(np.cross(w, (eye - r)[:, k]))) / t2 @ r
                     for k in range(3)])


def refined_w2c(w2c: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``Δ·W`` (4×4 float64) for the correction ``delta = (τ, ω)``."""
    delta = np.asarray(delta, np.float64)
    d = np.eye(4)
    d[:3, :3] = so3_exp(delta[3:])
    d[:3, 3] = delta[:3]
    return d @ np.asarray(w2c, np.float64)


def refined_camera(camera: Camera, delta: np.ndarray) -> Camera:
    """``camera`` with its pose corrected by ``delta``."""
    return Camera(refined_w2c(camera.world_to_camera, delta), camera.fx, camera.fy, camera.cx,
                  camera.cy, camera.width, camera.height, camera.name, camera.image_path)


def delta_grad(w2c: np.ndarray, delta: np.ndarray, view_grad: np.ndarray) -> np.ndarray:
    """``dL/dδ`` (6,) from ``view_grad = [dL/dR' | dL/dt']`` (3×4) of the refined pose, ``w2c`` the
    loaded pose."""
    w2c = np.asarray(w2c, np.float64)
    g = np.asarray(view_grad, np.float64)
    g_exp = g[:, :3] @ w2c[:3, :3].T + np.outer(g[:, 3], w2c[:3, 3])
    jac = so3_exp_jacobian(np.asarray(delta, np.float64)[3:])
    return np.concatenate([g[:, 3], np.einsum("kij,ij->k", jac, g_exp)])


def rotation_angle_deg(r: np.ndarray) -> float:
    """The angle of rotation matrix ``r`` in degrees."""
    c = (np.trace(r) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))))


@dataclass
class PoseState:
    """Every view's correction and its Adam moments, (V, 6) float32 each, and its step count."""

    params: np.ndarray
    m: np.ndarray
    v: np.ndarray
    steps: np.ndarray     # (V,) int64

    @staticmethod
    def fresh(views: int) -> PoseState:
        z = np.zeros((views, FLOATS), np.float32)
        return PoseState(z, z.copy(), z.copy(), np.zeros(views, np.int64))

    def to_arrays(self) -> dict:
        return {"params": self.params, "m": self.m, "v": self.v, "steps": self.steps}

    @staticmethod
    def from_arrays(d: dict) -> PoseState:
        return PoseState(*(np.ascontiguousarray(d[k], np.float32) for k in ("params", "m", "v")),
                         np.asarray(d["steps"], np.int64))


def adam_update(state: PoseState, view: int, grad: np.ndarray, lr: float, extent: float) -> None:
    """PyTorch's Adam on view ``view``'s correction (float32): rate ``lr`` for ω, ``lr·extent``
    for τ."""
    step_size, inv_bc2_sqrt = adam_scalars(state.steps, view, lr, BETA1, BETA2)
    rates = np.array([extent] * 3 + [1.0] * 3, np.float32) * np.float32(step_size)
    g = np.asarray(grad, np.float32)
    m, v, p = state.m[view], state.v[view], state.params[view]
    m += np.float32(1.0 - BETA1) * (g - m)
    v *= np.float32(BETA2)
    v += np.float32(1.0 - BETA2) * (g * g)
    p -= rates * m / (np.sqrt(v) * np.float32(inv_bc2_sqrt) + np.float32(POSE_EPS))
