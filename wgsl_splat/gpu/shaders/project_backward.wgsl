// docs/design.md §3 stage 7: projection backward and the strategy's statistics. Math: wgsl_splat/reference/
// projection.py (project_backward) and sh.py (eval_sh_backward); geometry shared with the forward
// pass through gaussian.wgsl. One thread per Gaussian.
//
// Reads the screen-space gradients accumulated by raster_backward.wgsl (grad2d: mean2d, opacity,
// conic, colour) and zeroes them for the next step; writes the gradient of every stored parameter
// into `grads` (same flat layout as `params`: means 3N | log-scales 3N | quats 4N | opacity N |
// SH N·K·3), zero for culled Gaussians and for SH bands above the active degree, so the buffer
// needs no clearing. The strategy's statistics of visible Gaussians (radius > 0) are accumulated
// by the generated accumulate_statistics (statistics.wgsl, from training/statistics.py; one plane
// of N floats per statistic). With STATS = false (gradient checks) they are left alone. With
// ACCUMULATE (the 2nd..Bth view of a batch) every gradient is added to the buffer instead of
// written, so after B views `grads` holds their sum (Adam scales it by 1/B).
//
// Where each gradient goes is the included SINK: grads_sink.wgsl writes `grads` as above;
// adam_sink.wgsl applies the Adam update to the parameter right there (a single-view step: no
// gradient buffer at all, 4·(11 + 3K) bytes per Gaussian less, and no Adam pass). Every stored
// parameter's gradient is put exactly once, after the last read of that parameter.
//
// Runs once per page of the state (gpu/pages.py): i is the row within the page.

override STATS: bool = true;
override ACCUMULATE: bool = false;

#include "common.wgsl"
#include "sh.wgsl"
#include "gaussian.wgsl"
#include "statistics.wgsl"
#include "param_terms.wgsl"
#include "pose_grad.wgsl"
#include "{{SINK}}"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(2) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(3) var<storage, read_write> grad2d: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;
@group(0) @binding(6) var<storage, read> filter3d: array<f32>;
@group(0) @binding(7) var<uniform> lt: LossTerms;
@group(0) @binding(8) var<storage, read_write> term_partials: array<f32>;

// Every gradient goes through put1, to the SINK.
fn put1(o: u32, v: f32) {
    sink(o, v);
}

fn put3(o: u32, v: vec3<f32>) {
    put1(o, v.x);
    put1(o + 1u, v.y);
    put1(o + 2u, v.z);
}

fn put4(o: u32, v: vec4<f32>) {
    put1(o, v.x);
    put1(o + 1u, v.y);
    put1(o + 2u, v.z);
    put1(o + 3u, v.w);
}

// dL/dq for R = quat_to_rotmat(q) given dL/dR as columns c0, c1, c2 (q normalised, w x y z).
fn rotmat_backward(q: vec4<f32>, c0: vec3<f32>, c1: vec3<f32>, c2: vec3<f32>) -> vec4<f32> {
    let w = q.x;
    let x = q.y;
    let y = q.z;
    let z = q.w;
    // g_ij = dL/dR[i][j] = column j, row i
    let g00 = c0.x; let g10 = c0.y; let g20 = c0.z;
    let g01 = c1.x; let g11 = c1.y; let g21 = c1.z;
    let g02 = c2.x; let g12 = c2.y; let g22 = c2.z;
    return 2.0 * vec4<f32>(
        -z * g01 + y * g02 + z * g10 - x * g12 - y * g20 + x * g21,
        y * g01 + z * g02 + y * g10 - 2.0 * x * g11 - w * g12 + z * g20 + w * g21 - 2.0 * x * g22,
        -2.0 * y * g00 + x * g01 + w * g02 + x * g10 + z * g12 - w * g20 + z * g21 - 2.0 * y * g22,
        -2.0 * z * g00 - w * g01 + x * g02 + w * g10 - 2.0 * z * g11 + y * g12 + x * g20 + y * g21);
}

// SH: dL/dsh_k = B_k(dir) dL/dc for the active bands (written into grads at `base`), zero above;
// returns dL/ddir = Σ_k (sh_k · dL/dc) dB_k/ddir. `grads` and `params` share the layout, so the
// splat's coefficients start at `base` in both. The coefficients are all read before any is put
// (the Adam sink updates them in place).
fn sh_backward(base: u32, k: u32, deg: u32, d: vec3<f32>, gc: vec3<f32>) -> vec3<f32> {
    var b: array<f32, 16>;
    sh_basis(d, &b);
    let x = d.x;
    let y = d.y;
    let z = d.z;
    var gd = vec3<f32>(0.0);
    if (deg >= 1u) {
        gd = gd + dot(sh_coeff(base, 1u), gc) * vec3<f32>(0.0, -SH_C1, 0.0)
                + dot(sh_coeff(base, 2u), gc) * vec3<f32>(0.0, 0.0, SH_C1)
                + dot(sh_coeff(base, 3u), gc) * vec3<f32>(-SH_C1, 0.0, 0.0);
    }
    if (deg >= 2u) {
        gd = gd + dot(sh_coeff(base, 4u), gc) * SH_C2_0 * vec3<f32>(y, x, 0.0)
                + dot(sh_coeff(base, 5u), gc) * SH_C2_1 * vec3<f32>(0.0, z, y)
                + dot(sh_coeff(base, 6u), gc) * SH_C2_2 * vec3<f32>(-2.0 * x, -2.0 * y, 4.0 * z)
                + dot(sh_coeff(base, 7u), gc) * SH_C2_3 * vec3<f32>(z, 0.0, x)
                + dot(sh_coeff(base, 8u), gc) * SH_C2_4 * vec3<f32>(2.0 * x, -2.0 * y, 0.0);
    }
    if (deg >= 3u) {
        let xx = x * x;
        let yy = y * y;
        let zz = z * z;
        gd = gd + dot(sh_coeff(base, 9u), gc) * SH_C3_0 * vec3<f32>(6.0 * x * y, 3.0 * xx - 3.0 * yy, 0.0)
                + dot(sh_coeff(base, 10u), gc) * SH_C3_1 * vec3<f32>(y * z, x * z, x * y)
                + dot(sh_coeff(base, 11u), gc) * SH_C3_2 * vec3<f32>(-2.0 * x * y, 4.0 * zz - xx - 3.0 * yy, 8.0 * y * z)
                + dot(sh_coeff(base, 12u), gc) * SH_C3_3 * vec3<f32>(-6.0 * x * z, -6.0 * y * z, 6.0 * zz - 3.0 * xx - 3.0 * yy)
                + dot(sh_coeff(base, 13u), gc) * SH_C3_4 * vec3<f32>(4.0 * zz - 3.0 * xx - yy, -2.0 * x * y, 8.0 * x * z)
                + dot(sh_coeff(base, 14u), gc) * SH_C3_5 * vec3<f32>(2.0 * x * z, -2.0 * y * z, xx - yy)
                + dot(sh_coeff(base, 15u), gc) * SH_C3_6 * vec3<f32>(3.0 * xx - 3.0 * yy, -6.0 * x * y, 0.0);
    }
    put3(base, b[0] * gc);
    if (deg >= 1u) {
        put3(base + 3u, b[1] * gc);
        put3(base + 6u, b[2] * gc);
        put3(base + 9u, b[3] * gc);
    }
    if (deg >= 2u) {
        for (var c = 4u; c < 9u; c = c + 1u) {
            put3(base + 3u * c, b[c] * gc);
        }
    }
    if (deg >= 3u) {
        for (var c = 9u; c < 16u; c = c + 1u) {
            put3(base + 3u * c, b[c] * gc);
        }
    }
    // Bands above the active degree (and above 3) get zero.
    for (var c = (deg + 1u) * (deg + 1u); c < k; c = c + 1u) {
        put3(base + 3u * c, vec3<f32>(0.0));
    }
    return gd;
}

var<workgroup> wg_terms: array<f32, BLOCK_SIZE>;

// The parameter terms' value is reduced per workgroup into term_partials (loss_terms.wgsl adds
// their sum to the step's loss); the reduction is compiled in only when a term is active.
@compute @workgroup_size(BLOCK_SIZE)
fn project_backward(@builtin(local_invocation_index) lid: u32,
                    @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>) {
    let wg = linear_workgroup(wid, nwg);
    let i = wg * BLOCK_SIZE + lid;
    var value = 0.0;
    if (i < rp.model.x) {
        value = backward_row(i);
    }
    if (PARAM_TERMS) {
        wg_terms[lid] = value;
        workgroupBarrier();
        for (var s = BLOCK_SIZE / 2u; s > 0u; s = s >> 1u) {
            if (lid < s) {
                wg_terms[lid] = wg_terms[lid] + wg_terms[lid + s];
            }
            workgroupBarrier();
        }
        // grid_2d's padding workgroups (past 32 768 per page) have no rows and no slot: without
        // the bound they write past the partials (Metal clamps that onto the last one)
        if (lid == 0u && wg * BLOCK_SIZE < rp.model.x) {
            term_partials[rp.grid.x / BLOCK_SIZE + wg] = wg_terms[0];   // pages start at whole workgroups
        }
    }
    reduce_pose(lid, wg);   // --pose-opt (pose_grad.wgsl, generated; nothing without it)
}

// One Gaussian's gradients and statistics; returns its share of the parameter terms' value.
fn backward_row(i: u32) -> f32 {
    let n = rp.model.x;
    let k = SH_COEFFS;
    let sh_base = rp.offs.w + i * k * 3u;
    let s = splats[i];
    let v0 = grad2d[3u * i];        // dL/d(mean2d.x, mean2d.y, opacity)
    let v1 = grad2d[3u * i + 1u];   // dL/d(conic a, b, c)
    let v2 = grad2d[3u * i + 2u];   // dL/d(colour)
    grad2d[3u * i] = vec4<f32>(0.0);
    grad2d[3u * i + 1u] = vec4<f32>(0.0);
    grad2d[3u * i + 2u] = vec4<f32>(0.0);

    if (s.radius <= 0.0) {
        // Culled: no gradient reaches any parameter.
        put3(3u * i, vec3<f32>(0.0));
        put3(rp.offs.x + 3u * i, vec3<f32>(0.0));
        put4(rp.offs.y + 4u * i, vec4<f32>(0.0));
        put1(rp.offs.z + i, 0.0);
        for (var c = 0u; c < k; c = c + 1u) {
            put3(sh_base + 3u * c, vec3<f32>(0.0));
        }
        return add_param_terms(i, n);
    }

    // The strategy's statistics (statistics.wgsl).
    if (STATS) {
        accumulate_statistics(i, n, v0, s, 0.5 * vec2<f32>(f32(rp.img.x), f32(rp.img.y)));
    }

    // Opacity = sigmoid(logit) (antialiased: times the compensations, below).
    if (!ANTIALIASED) {
        put1(rp.offs.z + i, v0.z * s.opacity * (1.0 - s.opacity));
    }

    // Colour = max(SH(dir) + 0.5, 0), dir = normalise(mean - camera centre).
    let mean = gaussian_mean(i);
    let view = mean - rp.cam_pos.xyz;
    let view_len = length(view);
    let d = view / max(view_len, 1e-12);
    let keep = vec3<f32>(select(1.0, 0.0, (s.flags & 1u) != 0u), select(1.0, 0.0, (s.flags & 2u) != 0u),
                         select(1.0, 0.0, (s.flags & 4u) != 0u));
    let g_dir = sh_backward(sh_base, k, active_degree(), d, v2.xyz * keep);
    var g_mean = (g_dir - d * dot(g_dir, d)) / max(view_len, 1e-12);
    let g_view = g_mean;

    // Conic = Σ2D⁻¹: dL/dΣ2D = -C G C, G the symmetric gradient (b counted twice).
    let t = camera_space(mean);
    let e = ewa_terms(i, t);
    let ca = s.conic.x;
    let cb = s.conic.y;
    let cc = s.conic.z;
    let ga = v1.x;
    let gb = 0.5 * v1.y;
    let gcc = v1.z;
    // C G (2x2, rows), then (C G) C.
    let p00 = ca * ga + cb * gb;
    let p01 = ca * gb + cb * gcc;
    let p10 = cb * ga + cc * gb;
    let p11 = cb * gb + cc * gcc;
    var s00 = -(p00 * ca + p01 * cb);
    var s01 = -(p00 * cb + p01 * cc);
    var s11 = -(p10 * cb + p11 * cc);

    // Antialiased: opacity = sigmoid · c3 · c2 (the 3D and 2D filters' compensations).
    var g_c3 = 0.0;
    var c3 = 1.0;
    if (ANTIALIASED) {
        let sig = 1.0 / (1.0 + exp(-params[rp.offs.z + i]));   // as project.wgsl
        c3 = filter3d_compensation(e);
        let c2 = filter2d_compensation(e, e.cov.x * e.cov.z - e.cov.y * e.cov.y);   // as forward
        put1(rp.offs.z + i, v0.z * c3 * c2 * sig * (1.0 - sig));
        g_c3 = v0.z * sig * c2;
        // c2 = sqrt(det Σ2D / det Σb), Σb = Σ2D + εI = C⁻¹: dc2/dΣ2D = ½ c2 (Σ2D⁻¹ − C)
        // = ½/c2 ((1 − c2²) C − ε det(C) I) (no Σ2D⁻¹: singular for flat splats). c2 > 0 here:
        // a splat with c2 = 0 has opacity 0 and is culled.
        let k = 0.5 * v0.z * sig * c3 / c2;
        let one_minus = 1.0 - c2 * c2;
        let eps_det = COV2D_DILATION * (ca * cc - cb * cb);
        s00 = s00 + k * (one_minus * ca - eps_det);
        s01 = s01 + k * one_minus * cb;
        s11 = s11 + k * (one_minus * cc - eps_det);
    }

    // Σ2D = A Aᵀ + εI with A = T M (rows a0, a1), T = J W (rows t0, t1).
    let ga0 = 2.0 * (s00 * e.a0 + s01 * e.a1);
    let ga1 = 2.0 * (s01 * e.a0 + s11 * e.a1);
    let gt0 = e.m * ga0;            // dL/dT row r = M · dL/dA row r
    let gt1 = e.m * ga1;
    // dL/dM column j = ga0[j] t0 + ga1[j] t1; M = R S.
    let gm0 = ga0.x * e.t0 + ga1.x * e.t1;
    let gm1 = ga0.y * e.t0 + ga1.y * e.t1;
    let gm2 = ga0.z * e.t0 + ga1.z * e.t1;
    let g_scale = vec3<f32>(dot(gm0, e.rot[0]), dot(gm1, e.rot[1]), dot(gm2, e.rot[2]));
    if (ANTIALIASED) {
        // scale3 = sqrt(scale² + f²): d scale3 / d log scale = scale² / scale3;
        // c3 = Π scale / scale3: d c3 / d log scale_k = c3 f² / scale3_k²
        let f2 = e.filt * e.filt;
        put3(rp.offs.x + 3u * i, g_scale * e.scale * e.scale / e.scale3
                                 + (g_c3 * c3 * f2) / (e.scale3 * e.scale3));
    } else {
        put3(rp.offs.x + 3u * i, g_scale * e.scale);
    }
    let g_qn = rotmat_backward(e.qn, gm0 * e.scale3.x, gm1 * e.scale3.y, gm2 * e.scale3.z);
    put4(rp.offs.y + 4u * i, (g_qn - e.qn * dot(g_qn, e.qn)) / e.qnorm);

    // dL/dJ = dL/dT Wᵀ: the four non-zero entries of J as functions of camera-space t.
    let w0 = rp.w2c0.xyz;
    let w1 = rp.w2c1.xyz;
    let w2 = rp.w2c2.xyz;
    let gj00 = dot(gt0, w0);
    let gj02 = dot(gt0, w2);
    let gj11 = dot(gt1, w1);
    let gj12 = dot(gt1, w2);
    let fx = rp.focal.x;
    let fy = rp.focal.y;
    let tz = t.z;
    let tz2 = tz * tz;
    let clamped = e.u != e.uc;
    var g_t = vec3<f32>(0.0, 0.0, -fx / tz2 * gj00 - fy / tz2 * gj11);
    // J02 = -fx·uc.x/tz: through t.x and t.z unless the tangent was clamped (then only t.z).
    g_t.x = g_t.x + select(-fx / tz2 * gj02, 0.0, clamped.x);
    g_t.z = g_t.z + select(2.0 * fx * e.u.x / tz2, fx * e.uc.x / tz2, clamped.x) * gj02;
    g_t.y = g_t.y + select(-fy / tz2 * gj12, 0.0, clamped.y);
    g_t.z = g_t.z + select(2.0 * fy * e.u.y / tz2, fy * e.uc.y / tz2, clamped.y) * gj12;
    // mean2d = (fx·t.x/t.z + cx, fy·t.y/t.z + cy)
    g_t = g_t + vec3<f32>(fx / tz * v0.x, fy / tz * v0.y, -fx * e.u.x / tz * v0.x - fy * e.u.y / tz * v0.y);
    g_mean = g_mean + g_t.x * w0 + g_t.y * w1 + g_t.z * w2;
    put3(3u * i, g_mean);
    pose_contribution(mean, g_view, g_t, gt0, gt1,
                      vec4<f32>(fx / tz, -fx * e.uc.x / tz, fy / tz, -fy * e.uc.y / tz));
    return add_param_terms(i, n);
}
