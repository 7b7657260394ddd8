"""Real spherical harmonics up to degree 3 (3DGS / gsplat constants and sign conventions): the
convention both paths and the exports share (``sh.wgsl`` includes the generated constants)."""

from __future__ import annotations

import numpy as np

from ..model import SH_C0  # the DC constant lives with the parameter conventions

SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
         0.5462742152960396)
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
         -0.4570457994644658, 1.445305721320277, -0.5900435899266435)


def sh_constants_wgsl() -> str:
    """The SH constants as WGSL (the generated ``sh_constants.wgsl`` that ``sh.wgsl`` includes):
    declared once, here."""
    lines = ["// Generated from wgsl_splat/contract/sh.py; not a file on disk.",
             f"const SH_C0: f32 = {SH_C0!r};", f"const SH_C1: f32 = {SH_C1!r};"]
    lines += [f"const SH_C2_{i}: f32 = {c!r};" for i, c in enumerate(SH_C2)]
    lines += [f"const SH_C3_{i}: f32 = {c!r};" for i, c in enumerate(SH_C3)]
    return "\n".join(lines) + "\n"


def sh_basis(dirs: np.ndarray, degree: int, with_jacobian: bool = False):
    """Basis values B (N,K) at unit directions ``dirs`` (N,3), K = (degree+1)^2; with
    ``with_jacobian`` also dB/d(dir) (N,K,3) — needed for the gradient through the view direction."""
    x, y, z = dirs[:, 0], dirs[:, 1], dirs[:, 2]
    n, k = len(dirs), (degree + 1) ** 2
    one, zero = np.ones_like(x), np.zeros_like(x)
    b = [SH_C0 * one]
    d = [(zero, zero, zero)]
    if degree >= 1:
        c1 = SH_C1
        b += [-c1 * y, c1 * z, -c1 * x]
        d += [(zero, -c1 * one, zero), (zero, zero, c1 * one), (-c1 * one, zero, zero)]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        c = SH_C2
        b += [c[0] * x * y, c[1] * y * z, c[2] * (2 * zz - xx - yy), c[3] * x * z, c[4] * (xx - yy)]
        d += [(c[0] * y, c[0] * x, zero), (zero, c[1] * z, c[1] * y),
              (-2 * c[2] * x, -2 * c[2] * y, 4 * c[2] * z), (c[3] * z, zero, c[3] * x),
              (2 * c[4] * x, -2 * c[4] * y, zero)]
    if degree >= 3:
        c = SH_C3
        b += [c[0] * y * (3 * xx - yy), c[1] * x * y * z, c[2] * y * (4 * zz - xx - yy),
              c[3] * z * (2 * zz - 3 * xx - 3 * yy), c[4] * x * (4 * zz - xx - yy),
              c[5] * z * (xx - yy), c[6] * x * (xx - 3 * yy)]
        d += [(c[0] * 6 * x * y, c[0] * (3 * xx - 3 * yy), zero),
              (c[1] * y * z, c[1] * x * z, c[1] * x * y),
              (c[2] * -2 * x * y, c[2] * (4 * zz - xx - 3 * yy), c[2] * 8 * y * z),
              (c[3] * -6 * x * z, c[3] * -6 * y * z, c[3] * (6 * zz - 3 * xx - 3 * yy)),
              (c[4] * (4 * zz - 3 * xx - yy), c[4] * -2 * x * y, c[4] * 8 * x * z),
              (c[5] * 2 * x * z, c[5] * -2 * y * z, c[5] * (xx - yy)),
              (c[6] * (3 * xx - 3 * yy), c[6] * -6 * x * y, zero)]
    basis = np.stack(b, axis=1).reshape(n, k)
    if not with_jacobian:
        return basis
    jac = np.stack([np.stack(g, axis=1) for g in d], axis=1).reshape(n, k, 3)
    return basis, jac


def eval_sh(sh: np.ndarray, dirs: np.ndarray, degree: int) -> np.ndarray:
    """Raw SH colour Σ_k B_k(dir)·sh_k (N,3) using the first (degree+1)^2 coefficients."""
    k = (degree + 1) ** 2
    return np.einsum("nk,nkc->nc", sh_basis(dirs, degree), sh[:, :k])


def eval_sh_backward(sh: np.ndarray, dirs: np.ndarray, degree: int, dL_dcolor: np.ndarray):
    """Gradients of ``eval_sh`` w.r.t. the coefficients (N,K_full,3) and the unit direction (N,3)."""
    k = (degree + 1) ** 2
    basis, jac = sh_basis(dirs, degree, with_jacobian=True)
    dL_dsh = np.zeros_like(sh)
    dL_dsh[:, :k] = basis[:, :, None] * dL_dcolor[:, None, :]
    # dL/ddir = Σ_k (sh_k · dL/dcolor) dB_k/ddir
    weights = np.einsum("nkc,nc->nk", sh[:, :k], dL_dcolor)
    dL_ddir = np.einsum("nk,nkj->nj", weights, jac)
    return dL_dsh, dL_ddir
