"""EWA projection of 3D Gaussians to screen space, and its exact analytic backward pass.

Conventions (docs/design.md §2): OpenCV camera, pinhole intrinsics, pixel centres at integer + 0.5,
near-plane cull at z < 0.01, the tangent of the view ray clamped to ±1.3·tan(half-fov) before the
Jacobian, 0.3 px² low-pass dilation, radius = ceil(3·sqrt(λ_max)), 16×16 pixel tiles; the values
come from a :class:`~wgsl_splat.render_config.RenderConfig`.

The antialiased mode (Mip-Splatting, see render_config.py) adds two filters, both folded into the
covariance and the opacity so that rasterisation is unchanged:

- 3D: scales s → s3 = sqrt(s² + f²) with f the Gaussian's ``filter_3d`` (Σ + f²I, since R
  commutes with a multiple of I), opacity × c3 = Π s/s3 = sqrt(det Σ / det(Σ + f²I));
- 2D: the dilation ε = 0.1 px² and opacity × c2 = sqrt(det Σ2D / det(Σ2D + εI)).

The opacity the rasteriser sees is sigmoid(logit)·c3·c2; both factors are differentiated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..camera import Camera
from ..contract.filter3d import filter_3d_scales
from ..contract.sh import eval_sh, eval_sh_backward
from ..model import GaussianModel
from ..render_config import CLASSIC, RenderConfig


@dataclass
class Projection:
    """Per-Gaussian screen-space quantities (N rows; rows with radii == 0 are culled).

    conics holds (a, b, c) of the inverse 2D covariance [[a, b], [b, c]]; tile_rect holds the
    covered tiles as (tx0, ty0, tx1, ty1), max exclusive (see :func:`tile_extent`). ``terms`` keeps intermediates for the
    backward pass.
    """

    means2d: np.ndarray
    conics: np.ndarray
    depths: np.ndarray
    radii: np.ndarray
    colors: np.ndarray
    opacities: np.ndarray
    tile_rect: np.ndarray
    width: int
    height: int
    terms: dict = field(default_factory=dict, repr=False)
    config: RenderConfig = CLASSIC

    @property
    def visible(self) -> np.ndarray:
        return self.radii > 0

    @property
    def tiles_x(self) -> int:
        return -(-self.width // self.config.tile_size)

    @property
    def tiles_y(self) -> int:
        return -(-self.height // self.config.tile_size)


def quat_to_rotmat(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (N,3,3) from *normalised* quaternions w,x,y,z (N,4)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], axis=1).reshape(-1, 3, 3)


def rotmat_backward(q: np.ndarray, dL_dR: np.ndarray) -> np.ndarray:
    """dL/dq (N,4) for R = quat_to_rotmat(q) given dL/dR (N,3,3), q normalised w,x,y,z."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    g = dL_dR
    dw = 2 * (-z * g[:, 0, 1] + y * g[:, 0, 2] + z * g[:, 1, 0] - x * g[:, 1, 2] - y * g[:, 2, 0]
              + x * g[:, 2, 1])
    dx = 2 * (y * g[:, 0, 1] + z * g[:, 0, 2] + y * g[:, 1, 0] - 2 * x * g[:, 1, 1] - w * g[:, 1, 2]
              + z * g[:, 2, 0] + w * g[:, 2, 1] - 2 * x * g[:, 2, 2])
    dy = 2 * (-2 * y * g[:, 0, 0] + x * g[:, 0, 1] + w * g[:, 0, 2] + x * g[:, 1, 0] + z * g[:, 1, 2]
              - w * g[:, 2, 0] + z * g[:, 2, 1] - 2 * y * g[:, 2, 2])
    dz = 2 * (-2 * z * g[:, 0, 0] - w * g[:, 0, 1] + x * g[:, 0, 2] + w * g[:, 1, 0]
              - 2 * z * g[:, 1, 1] + y * g[:, 1, 2] + x * g[:, 2, 0] + y * g[:, 2, 1])
    return np.stack([dw, dx, dy, dz], axis=1)


def tile_extent(cov_xx, cov_yy, opacity, radius) -> np.ndarray:
    """Half-extents (N,2) in pixels of the tile rectangle: the bounding box of the ellipse where
    ``α = o·exp(-½ dᵀΣ⁻¹d)`` can reach 1/255, i.e. ``sqrt(2 ln(255 o) Σxx)`` along x (Σyy along y),
    rounded up and capped by the 3σ radius. Every pixel a splat composites onto lies inside, so
    the image equals that of the 3σ square, with fewer (tile, splat) pairs to sort and rasterise
    (measured about 20% fewer at initialisation, where opacity is 0.1; more for elongated splats)."""
    lg = np.maximum(np.log(np.maximum(opacity * 255.0, 1e-30)), 0.0)
    ext = np.ceil(np.sqrt(2.0 * lg[:, None] * np.stack([cov_xx, cov_yy], axis=1)))
    return np.minimum(ext, np.asarray(radius)[:, None])


def tile_min_q(means2d, conics, tx, ty, width: int, height: int, tile: int) -> np.ndarray:
    """The least ``q = dᵀ·conic·d`` (d = point − mean) over the rectangle spanned by the pixel
    centres of tile (tx, ty) inside the image, per (splat, tile) pair (arrays broadcast together):
    :func:`rect_min_q` of that rectangle. Shared by the emission of both paths through
    :func:`tile_pairs_kept` (``emit.wgsl`` evaluates the same expressions in float32)."""
    x0 = tx * tile + 0.5
    y0 = ty * tile + 0.5
    return rect_min_q(means2d, conics, x0, y0, np.minimum(x0 + (tile - 1), width - 0.5),
                      np.minimum(y0 + (tile - 1), height - 0.5))


def rect_min_q(means2d, conics, x0, y0, x1, y1) -> np.ndarray:
    """The least ``q = dᵀ·conic·d`` over the rectangle [x0, x1] × [y0, y1].

    q is convex, so its minimum over the rectangle is 0 when the mean is inside, else on an edge
    facing the mean: on the vertical line x = clamp(μx) the best dy is -b·dx/c clamped to the
    rectangle, on the horizontal line y = clamp(μy) the best dx is -b·dy/a clamped; the smaller of
    the two is the minimum (the segment from the mean to any point of the rectangle crosses one of
    those two edges, where q is smaller still)."""
    mx, my = means2d[..., 0], means2d[..., 1]
    a, b, c = conics[..., 0], conics[..., 1], conics[..., 2]
    dx = np.clip(mx, x0, x1) - mx
    dy1 = np.clip(my - b * dx / c, y0, y1) - my
    dy = np.clip(my, y0, y1) - my
    dx2 = np.clip(mx - b * dy / a, x0, x1) - mx
    q1 = a * dx * dx + 2.0 * b * dx * dy1 + c * dy1 * dy1
    q2 = a * dx2 * dx2 + 2.0 * b * dx2 * dy + c * dy * dy
    return np.minimum(q1, q2)


def tile_q_bound(opacities, config: RenderConfig = CLASSIC) -> np.ndarray:
    """The largest q at which α = o·exp(-q/2) reaches ``alpha_min``, widened by the tile test's
    margin: ``2 ln(o / alpha_min)·(1 + m) + m``."""
    m = config.tile_test_margin
    return 2.0 * np.log(np.maximum(opacities, 1e-30) / config.alpha_min) * (1.0 + m) + m


def tile_pairs_kept(proj: "Projection", gid: np.ndarray, tx: np.ndarray, ty: np.ndarray
                    ) -> np.ndarray:
    """Which (Gaussian, tile) pairs of the tile rectangles rasterisation gets: those whose α ≥
    alpha_min ellipse reaches the tile (:func:`tile_min_q` ≤ :func:`tile_q_bound`), not every tile
    of the bounding rectangle — at initialisation a fifth of the rectangles' tiles hold no pixel
    the splat composites onto, and more for elongated splats."""
    if len(gid) == 0:
        return np.zeros(0, bool)
    q = tile_min_q(proj.means2d[gid], proj.conics[gid], tx, ty, proj.width, proj.height,
                   proj.config.tile_size)
    return q <= tile_q_bound(proj.opacities[gid], proj.config)


def valid_rows(model: GaussianModel) -> np.ndarray:
    """(N,) bool: the rows whose parameters describe a Gaussian at all -- mean, log-scales,
    quaternion and opacity logit finite, the quaternion not zero. The others are culled on both
    paths (``gaussian.wgsl``'s ``gaussian_valid``, which tests the bits, since a GPU compiled with
    fast math may not compare NaN or Inf as IEEE says), as are rows whose projection overflows."""
    finite = (np.isfinite(model.means).all(axis=1) & np.isfinite(model.log_scales).all(axis=1)
              & np.isfinite(model.quats).all(axis=1) & np.isfinite(model.opacity_logits))
    return finite & (model.quats != 0).any(axis=1)


def project(model: GaussianModel, camera: Camera, active_sh_degree: int | None = None,
            config: RenderConfig = CLASSIC, filter_3d: np.ndarray | None = None) -> Projection:
    """Project every Gaussian; computed in the model's dtype (use float64 for gradient checks).

    ``filter_3d`` (N,): the antialiased mode's 3D filter of every Gaussian (None: zero, i.e. only
    the 2D Mip filter); ignored in the classic mode."""
    dtype = model.dtype
    aa = config.antialiased
    if aa and filter_3d is not None and np.shape(filter_3d) != (model.num,):
        raise ValueError(f"filter_3d must have shape ({model.num},), got {np.shape(filter_3d)}")
    deg = model.sh_degree if active_sh_degree is None else min(active_sh_degree, model.sh_degree)
    rot_cam = camera.rotation.astype(dtype)
    trans_cam = camera.translation.astype(dtype)
    fx, fy, cx, cy = (dtype.type(v) for v in (camera.fx, camera.fy, camera.cx, camera.cy))

    valid = valid_rows(model)
    with np.errstate(invalid="ignore", over="ignore"):
        t = model.means @ rot_cam.T + trans_cam
    in_front = valid & np.isfinite(t[:, 2]) & (t[:, 2] >= config.near_plane)
    tz = np.where(in_front, t[:, 2], 1.0).astype(dtype)  # culled rows: keep the math finite
    tx, ty = t[:, 0], t[:, 1]

    qnorm = np.linalg.norm(model.quats, axis=1)
    qn = model.quats / qnorm[:, None]
    rot = quat_to_rotmat(qn)
    scales = np.exp(model.log_scales)
    scales3, comp3 = filter_3d_scales(scales, filter_3d) if aa else (scales, None)
    m = rot * scales3[:, None, :]  # R·S
    cov3d = m @ m.transpose(0, 2, 1)

    lim_x = config.frustum_clamp * camera.tan_half_fov_x
    lim_y = config.frustum_clamp * camera.tan_half_fov_y
    ux, uy = tx / tz, ty / tz
    clamped_x = (ux < -lim_x) | (ux > lim_x)
    clamped_y = (uy < -lim_y) | (uy > lim_y)
    ux_c, uy_c = np.clip(ux, -lim_x, lim_x), np.clip(uy, -lim_y, lim_y)
    n = model.num
    jac = np.zeros((n, 2, 3), dtype=dtype)
    jac[:, 0, 0] = fx / tz
    jac[:, 0, 2] = -fx * ux_c / tz
    jac[:, 1, 1] = fy / tz
    jac[:, 1, 2] = -fy * uy_c / tz
    tmat = jac @ rot_cam  # J·W
    cov2d = tmat @ cov3d @ tmat.transpose(0, 2, 1)
    a = cov2d[:, 0, 0] + config.dilation
    b = cov2d[:, 0, 1]
    c = cov2d[:, 1, 1] + config.dilation
    det = a * c - b * b
    with np.errstate(invalid="ignore"):
        ok = in_front & np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & np.isfinite(det) \
            & (det > 0)
    safe_det = np.where(ok, det, 1.0)
    conics = np.stack([c / safe_det, -b / safe_det, a / safe_det], axis=1)
    mid = 0.5 * (a + c)
    lam_max = mid + np.sqrt(np.maximum(mid * mid - det, 0.0))
    radius = np.ceil(3.0 * np.sqrt(np.maximum(lam_max, 0.0)))

    means2d = np.stack([fx * ux + cx, fy * uy + cy], axis=1)
    sigmoid = 1.0 / (1.0 + np.exp(-model.opacity_logits))
    opacities = sigmoid
    comp2 = None
    if aa:
        # 2D Mip filter: sqrt(det Σ2D / det(Σ2D + εI)), 0 where the projection is degenerate
        det_raw = cov2d[:, 0, 0] * cov2d[:, 1, 1] - b * b
        comp2 = np.sqrt(np.maximum(np.where(ok, det_raw / safe_det, 0.0), 0.0))
        # culled rows keep the plain sigmoid (the GPU never computes their filters)
        opacities = np.where(ok, sigmoid * comp3 * comp2, sigmoid)
    extent = tile_extent(a, c, opacities, radius)
    tile = config.tile_size
    tiles_x = -(-camera.width // tile)
    tiles_y = -(-camera.height // tile)
    with np.errstate(invalid="ignore"):
        rect = np.stack([
            np.clip(np.floor((means2d[:, 0] - extent[:, 0]) / tile), 0, tiles_x),
            np.clip(np.floor((means2d[:, 1] - extent[:, 1]) / tile), 0, tiles_y),
            np.clip(np.ceil((means2d[:, 0] + extent[:, 0]) / tile), 0, tiles_x),
            np.clip(np.ceil((means2d[:, 1] + extent[:, 1]) / tile), 0, tiles_y),
        ], axis=1)
    with np.errstate(invalid="ignore"):
        edges = np.stack([means2d[:, 0] - extent[:, 0], means2d[:, 1] - extent[:, 1],
                          means2d[:, 0] + extent[:, 0], means2d[:, 1] + extent[:, 1]], axis=1)
        ok &= np.isfinite(radius) & np.isfinite(opacities) & np.isfinite(edges).all(axis=1)
        ok &= opacities * 255.0 > 1.0      # never reaches alpha 1/255 anywhere: nothing to draw
    rect = np.where(ok[:, None], np.nan_to_num(rect), 0).astype(np.int64)
    ok &= (rect[:, 2] > rect[:, 0]) & (rect[:, 3] > rect[:, 1])
    rect[~ok] = 0
    radii = np.where(ok, radius, 0).astype(np.int32)

    view = model.means - camera.center.astype(dtype)
    view_len = np.linalg.norm(view, axis=1)
    dirs = view / np.maximum(view_len, 1e-12)[:, None]
    colors_raw = eval_sh(model.sh, dirs, deg) + 0.5
    colors = np.maximum(colors_raw, 0.0)

    terms = dict(t=t, tz=tz, ux=ux, uy=uy, ux_c=ux_c, uy_c=uy_c, clamped_x=clamped_x,
                 clamped_y=clamped_y, qn=qn, qnorm=qnorm, rot=rot, scales=scales, m=m,
                 cov3d=cov3d, tmat=tmat, view_len=view_len, dirs=dirs,
                 colors_raw=colors_raw, sh_degree=deg, sigmoid=sigmoid, scales3=scales3,
                 comp3=comp3, comp2=comp2,
                 filter_3d=None if filter_3d is None else np.asarray(filter_3d, dtype))
    return Projection(means2d, conics, t[:, 2].copy(), radii, colors, opacities, rect,
                      camera.width, camera.height, terms, config)


def project_backward(model: GaussianModel, camera: Camera, proj: Projection, dL_dmeans2d: np.ndarray,
                     dL_dconics: np.ndarray, dL_dcolors: np.ndarray,
                     dL_dopacities: np.ndarray, view_grad: np.ndarray | None = None
                     ) -> GaussianModel:
    """Chain screen-space gradients back to the parameters; returns a GaussianModel of gradients.

    dL_dconics is w.r.t. (a, b, c) where b is the shared off-diagonal entry. Culled rows get zero.
    ``view_grad`` (3, 4): ``[dL/dR | dL/dt]`` of the camera's world-to-camera matrix is added into
    it (``--pose-opt``, :func:`view_matrix_grad`).
    """
    tm = proj.terms
    vis = proj.visible
    dtype = model.dtype
    rot_cam = camera.rotation.astype(dtype)
    fx, fy = dtype.type(camera.fx), dtype.type(camera.fy)
    grads = model.zeros_like()
    if not vis.any():
        return grads
    # Only visible rows carry gradient; zeroing the inputs keeps all later math finite and exact.
    g_m2d = np.where(vis[:, None], dL_dmeans2d, 0.0)
    g_conic = np.where(vis[:, None], dL_dconics, 0.0)
    g_col = np.where(vis[:, None], dL_dcolors, 0.0)
    g_opa = np.where(vis, dL_dopacities, 0.0)
    tz, ux, uy = tm["tz"], tm["ux"], tm["uy"]

    aa = proj.config.antialiased
    if aa:
        # opacity = sigmoid(logit) · c3 · c2
        sig, comp3, comp2 = tm["sigmoid"], tm["comp3"], tm["comp2"]
        grads.opacity_logits[:] = g_opa * comp3 * comp2 * sig * (1.0 - sig)
        g_comp3 = g_opa * sig * comp2
        g_comp2 = g_opa * sig * comp3
    else:
        # opacity = sigmoid(logit)
        o = proj.opacities
        grads.opacity_logits[:] = g_opa * o * (1.0 - o)

    # colour = max(SH(dir) + 0.5, 0), dir = normalise(mean - camera centre)
    g_col = g_col * (tm["colors_raw"] > 0)
    g_sh, g_dir = eval_sh_backward(model.sh, tm["dirs"], tm["sh_degree"], g_col)
    grads.sh[:] = g_sh
    d = tm["dirs"]
    g_view = (g_dir - d * np.sum(g_dir * d, axis=1, keepdims=True)) / np.maximum(tm["view_len"], 1e-12)[:, None]
    g_means = g_view

    # conic = inverse(Σ2D): dL/dΣ2D = -C G C with G the symmetric gradient (b counted twice)
    a_, b_, c_ = proj.conics[:, 0], proj.conics[:, 1], proj.conics[:, 2]
    cmat = np.stack([a_, b_, b_, c_], axis=1).reshape(-1, 2, 2)
    gmat = np.stack([g_conic[:, 0], 0.5 * g_conic[:, 1], 0.5 * g_conic[:, 1], g_conic[:, 2]],
                    axis=1).reshape(-1, 2, 2)
    g_cov2d = -cmat @ gmat @ cmat
    if aa:
        # c2 = sqrt(det Σ / det Σ_b), Σ_b = Σ + εI = C⁻¹: dc2/dΣ = ½ c2 (Σ⁻¹ − Σ_b⁻¹)
        # = ½/c2 ((1 − c2²) C − ε det(C) I), written without Σ⁻¹ (singular for flat splats)
        k = np.where(vis, 0.5 * g_comp2 / np.where(vis, comp2, 1.0), 0.0)
        det_c = a_ * c_ - b_ * b_
        eye = np.eye(2, dtype=dtype)
        g_cov2d = g_cov2d + k[:, None, None] * ((1.0 - comp2 * comp2)[:, None, None] * cmat
                                                 - (proj.config.dilation * det_c)[:, None, None] * eye)

    # Σ2D = T Σ Tᵀ + εI with T = J W
    tmat, cov3d = tm["tmat"], tm["cov3d"]
    g_cov3d = tmat.transpose(0, 2, 1) @ g_cov2d @ tmat
    g_tmat = 2.0 * g_cov2d @ tmat @ cov3d
    g_jac = g_tmat @ rot_cam.T

    # Σ = M Mᵀ, M = R(q) S (S = diag(s3) with the 3D filter)
    g_m = 2.0 * g_cov3d @ tm["m"]
    scales, scales3, rot = tm["scales"], tm["scales3"], tm["rot"]
    g_scales = np.sum(g_m * rot, axis=1)
    if aa:
        # s3 = sqrt(s² + f²): ds3/dlog s = s²/s3; c3 = Π s/s3: dc3/dlog s_k = c3 f²/s3_k²
        grads.log_scales[:] = g_scales * scales * scales / scales3
        if tm["filter_3d"] is not None:
            f2 = np.square(tm["filter_3d"])[:, None]
            grads.log_scales[:] += (g_comp3 * comp3)[:, None] * f2 / (scales3 * scales3)
    else:
        grads.log_scales[:] = g_scales * scales
    g_rot = g_m * scales3[:, None, :]
    g_qn = rotmat_backward(tm["qn"], g_rot)
    qn = tm["qn"]
    grads.quats[:] = (g_qn - qn * np.sum(g_qn * qn, axis=1, keepdims=True)) / tm["qnorm"][:, None]

    # J entries as functions of camera-space t (exact also where the ray tangent is clamped:
    # there J02 = -fx·lim/tz and does not depend on tx).
    g_t = np.zeros_like(tm["t"])
    tz2 = tz * tz
    g_t[:, 2] += -fx / tz2 * g_jac[:, 0, 0] - fy / tz2 * g_jac[:, 1, 1]
    # J02 = -fx·ux_c/tz; unclamped ux_c = tx/tz
    cx_mask, cy_mask = tm["clamped_x"], tm["clamped_y"]
    g_t[:, 0] += np.where(cx_mask, 0.0, -fx / tz2 * g_jac[:, 0, 2])
    g_t[:, 2] += np.where(cx_mask, fx * tm["ux_c"] / tz2, 2.0 * fx * ux / tz2) * g_jac[:, 0, 2]
    g_t[:, 1] += np.where(cy_mask, 0.0, -fy / tz2 * g_jac[:, 1, 2])
    g_t[:, 2] += np.where(cy_mask, fy * tm["uy_c"] / tz2, 2.0 * fy * uy / tz2) * g_jac[:, 1, 2]
    # mean2d = (fx·tx/tz + cx, fy·ty/tz + cy)
    g_t[:, 0] += fx / tz * g_m2d[:, 0]
    g_t[:, 1] += fy / tz * g_m2d[:, 1]
    g_t[:, 2] += -fx * ux / tz * g_m2d[:, 0] - fy * uy / tz * g_m2d[:, 1]
    if view_grad is not None:
        view_grad += view_matrix_grad(model, camera, tm, g_t, g_tmat, g_view)
    g_means = g_means + g_t @ rot_cam
    grads.means[:] = np.where(vis[:, None], g_means, 0.0)
    for arr in (grads.log_scales, grads.quats, grads.sh):
        arr[~vis] = 0.0
    return grads


def view_matrix_grad(model: GaussianModel, camera: Camera, terms: dict, g_t: np.ndarray,
                     g_tmat: np.ndarray, g_view: np.ndarray) -> np.ndarray:
    """``[dL/dR | dL/dt]`` (3, 4) of the world-to-camera matrix ``[R | t]`` from the per-Gaussian
    gradients :func:`project_backward` computes (zero on culled rows), through the three places
    the pose enters the projection:

    - camera-space means ``t_c = R·μ + t``: ``dL/dR += Σ g_t·μᵀ``, ``dL/dt += Σ g_t``;
    - ``T = J·R`` in ``Σ2D = T Σ Tᵀ``: ``dL/dR += Σ Jᵀ·dL/dT`` (with J = T·Rᵀ);
    - the SH view direction from the centre ``c = −Rᵀt``: with ``g_c = −Σ dL/d(μ − c)``,
      ``dL/dt += −R·g_c`` and ``dL/dR += −t·g_cᵀ``.
    """
    rot_cam = camera.rotation.astype(model.dtype)
    trans = camera.translation.astype(model.dtype)
    jac = terms["tmat"] @ rot_cam.T
    g_r = g_t.T @ model.means + np.einsum("nji,njk->ik", jac, g_tmat)
    g_tr = g_t.sum(axis=0)
    g_c = -g_view.sum(axis=0)
    g_tr = g_tr - rot_cam @ g_c
    g_r = g_r - np.outer(trans, g_c)
    return np.concatenate([g_r, g_tr[:, None]], axis=1)
