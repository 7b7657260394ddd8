"""Camera pose refinement (``--pose-opt``, gsplat's ``pose_opt``; docs/captures.md): a 6-DoF
correction of every training view's pose, learned with the model.

A view's correction is ``δ = (τ, ω)``: a translation τ and an axis-angle rotation ω (radians), both
in camera axes, applied to the loaded world-to-camera matrix ``W = [R | t]`` as ``W' = Δ·W`` with
``Δ = [exp(ω) | τ]``, so ``R' = exp(ω)·R`` and ``t' = exp(ω)·t + τ``. δ = 0 is the loaded pose.

Gradients: the projection's backward pass gives ``dL/dR'`` and ``dL/dt'`` (the 3×4 view-matrix
gradient, ``reference/projection.py:view_matrix_grad``); then ``dL/dτ = dL/dt'``,
``dL/dexp(ω) = dL/dR'·Rᵀ + dL/dt'·tᵀ`` and ``dL/dω_k = Σ dL/dexp(ω) ⊙ ∂exp(ω)/∂ω_k`` through
SO(3)'s left Jacobian (:func:`left_jacobian`: stable in float32 near ω = 0). Each view's δ is
updated by its own Adam right after its view's backward pass (``contract/per_view.py``); the
rotation's rate is ``pose_lr``, the translation's ``pose_lr × scene extent`` (world units, as the
means' rate: :func:`rate_scale`).

Training-only: the PLY is the standard layout, and held-out views keep their loaded poses (nothing
is fitted on a test view).
"""

from __future__ import annotations

import numpy as np

from ..camera import Camera
from .per_view import PerViewState

FLOATS = 6                  # τ (3), ω (3)


def hat(v: np.ndarray) -> np.ndarray:
    """The cross-product matrix [v]× of a 3-vector."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def so3_exp(w: np.ndarray) -> np.ndarray:
    """Rodrigues: the rotation matrix of axis-angle ``w`` (float64)."""
    w = np.asarray(w, np.float64)
    t2 = float(w @ w)
    k = hat(w)
    if t2 < 0.01:   # Taylor series to θ⁴ (pose.wgsl's float32 branch), within 1e-9 below θ = 0.1
        s = 1.0 - t2 / 6.0 + t2 * t2 / 120.0
        c = 0.5 - t2 / 24.0 + t2 * t2 / 720.0
    else:
        theta = np.sqrt(t2)
        s, c = np.sin(theta) / theta, (1.0 - np.cos(theta)) / t2
    return np.eye(3) + s * k + c * k @ k


def left_jacobian(w: np.ndarray) -> np.ndarray:
    """SO(3)'s left Jacobian ``J_l(w) = I + A·[w]× + B·[w]×²``, ``A = (1 − cos θ)/θ²``,
    ``B = (θ − sin θ)/θ³`` (Taylor series below θ = 0.1, as ``pose.wgsl`` in float32), so that
    ``∂exp(w)/∂w_k = [J_l(w)·e_k]× · exp(w)``."""
    w = np.asarray(w, np.float64)
    t2 = float(w @ w)
    if t2 < 0.01:
        a = 0.5 - t2 / 24.0 + t2 * t2 / 720.0
        b = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0
    else:
        theta = np.sqrt(t2)
        a = (1.0 - np.cos(theta)) / t2
        b = (theta - np.sin(theta)) / (t2 * theta)
    k = hat(w)
    return np.eye(3) + a * k + b * k @ k


def so3_exp_jacobian(w: np.ndarray) -> np.ndarray:
    """``∂exp(w)/∂w_k`` (3, 3, 3), k first."""
    jl, r = left_jacobian(w), so3_exp(w)
    return np.stack([hat(jl[:, k]) @ r for k in range(3)])


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
    w = np.asarray(delta, np.float64)[3:]
    # Σ G ⊙ ([a]×·R) = a · v with M = R·Gᵀ, v = (M12 − M21, M20 − M02, M01 − M10); a = J_l·e_k
    m = so3_exp(w) @ g_exp.T
    v = np.array([m[1, 2] - m[2, 1], m[2, 0] - m[0, 2], m[0, 1] - m[1, 0]])
    return np.concatenate([g[:, 3], left_jacobian(w).T @ v])


def rotation_angle_deg(r: np.ndarray) -> float:
    """The angle of rotation matrix ``r`` in degrees."""
    c = (np.trace(r) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))))


class PoseState(PerViewState):
    """Every view's correction and its Adam moments, (V, 6) float32 each, and its step count."""

    SHAPE = (FLOATS,)


def rate_scale(extent: float) -> np.ndarray:
    """The per-element factor of the Adam rate: the scene extent for τ, 1 for ω."""
    return np.array([extent] * 3 + [1.0] * 3, np.float32)
