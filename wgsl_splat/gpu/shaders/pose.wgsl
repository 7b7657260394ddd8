// --pose-opt (docs/captures.md): the view's corrected pose before the forward pass and the Adam
// update of its correction after the backward pass. Math: training/pose.py.
//
//   pose_apply   one thread: W' = Δ·W from the view's δ = (τ, ω) in pose_state and the loaded
//                [R | t] -> pose_camera (the rows of [R' | t'] and the centre −R'ᵀt': the first
//                64 bytes of RenderParams, copied there before the step's pass). One 3×3 product
//                and 16 floats written: there is nothing to share among threads.
//   pose_update  one workgroup: the per-workgroup partials of [dL/dR' | dL/dt'] that
//                project_backward.wgsl wrote (one per 256 Gaussians: 3 900 at 1 M), each thread
//                summing those p ≡ lid (mod WG) in order and a tree in workgroup memory summing
//                the threads: a fixed order, the same bits run to run (no float atomics). Then one
//                thread turns the sum into dL/dδ and applies Adam to the view's 6 floats
//                (pose_state: params, m, v, 18 floats per view): a few dozen flops, less than a
//                barrier costs to share.
//   pose_update_serial  the same on one thread, the partials summed in order: the CPU layout
//                (Layout.per_view_tiles off), where a workgroup's barriers cost more than the sum.

struct PoseParams {
    w0: vec4<f32>,     // rows of the loaded world-to-camera [R | t]
    w1: vec4<f32>,
    w2: vec4<f32>,
    adam: vec4<f32>,   // lr / (1 - β1^t), 1 / sqrt(1 - β2^t), β1, β2
    misc: vec4<f32>,   // ε, scene extent (the translation's rate factor), 0, 0
    dims: vec4<u32>,   // view, partials (workgroups of project_backward), 0, 0
}

@group(0) @binding(0) var<uniform> pp: PoseParams;
@group(0) @binding(1) var<storage, read_write> pose_state: array<f32>;
@group(0) @binding(2) var<storage, read_write> pose_camera: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> pose_partials: array<vec4<f32>>;

#include "adam_update.wgsl"
#include "row_sums.wgsl"

const FLOATS: u32 = 6u;

fn partial_row(i: u32, r: u32) -> vec4<f32> {
    return pose_partials[3u * i + r];
}

fn hat(v: vec3<f32>) -> mat3x3<f32> {   // [v]×, built from columns
    return mat3x3<f32>(vec3<f32>(0.0, v.z, -v.y), vec3<f32>(-v.z, 0.0, v.x),
                       vec3<f32>(v.y, -v.x, 0.0));
}

// I + s·[w]× + c·[w]×² with (s, c) = (sin θ/θ, (1 − cos θ)/θ²) for exp, (A, B) for J_l.
fn so3_series(w: vec3<f32>, jacobian: bool) -> mat3x3<f32> {
    let t2 = dot(w, w);
    var s: f32;
    var c: f32;
    if (t2 < 0.01) {   // Taylor series to θ⁴ (the reference's branch)
        if (jacobian) {
            s = 0.5 - t2 / 24.0 + t2 * t2 / 720.0;
            c = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0;
        } else {
            s = 1.0 - t2 / 6.0 + t2 * t2 / 120.0;
            c = 0.5 - t2 / 24.0 + t2 * t2 / 720.0;
        }
    } else {
        let th = sqrt(t2);
        if (jacobian) {
            s = (1.0 - cos(th)) / t2;
            c = (th - sin(th)) / (t2 * th);
        } else {
            s = sin(th) / th;
            c = (1.0 - cos(th)) / t2;
        }
    }
    let k = hat(w);
    let eye = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0),
                          vec3<f32>(0.0, 0.0, 1.0));
    return eye + s * k + c * (k * k);
}

fn delta(k: u32) -> f32 {
    return pose_state[pp.dims.x * 3u * FLOATS + k];
}

fn loaded_rotation() -> mat3x3<f32> {   // R (columns)
    return transpose(mat3x3<f32>(pp.w0.xyz, pp.w1.xyz, pp.w2.xyz));
}

@compute @workgroup_size(1)
fn pose_apply() {
    let tau = vec3<f32>(delta(0u), delta(1u), delta(2u));
    let e = so3_series(vec3<f32>(delta(3u), delta(4u), delta(5u)), false);
    let r = e * loaded_rotation();
    let t = e * vec3<f32>(pp.w0.w, pp.w1.w, pp.w2.w) + tau;
    let rt = transpose(r);   // columns of rt = rows of R'
    pose_camera[0] = vec4<f32>(rt[0], t.x);
    pose_camera[1] = vec4<f32>(rt[1], t.y);
    pose_camera[2] = vec4<f32>(rt[2], t.z);
    pose_camera[3] = vec4<f32>(-(rt * t), 0.0);   // −R'ᵀt'
}

@compute @workgroup_size(WG)
fn pose_update(@builtin(local_invocation_index) lid: u32) {
    sum_partials(lid, pp.dims.y);
    if (lid == 0u) {
        pose_step(wg_sums[0], wg_sums[WG], wg_sums[2u * WG]);
    }
}

@compute @workgroup_size(1)
fn pose_update_serial() {
    var g0 = vec4<f32>(0.0);
    var g1 = vec4<f32>(0.0);
    var g2 = vec4<f32>(0.0);
    for (var p = 0u; p < pp.dims.y; p = p + 1u) {
        g0 = g0 + pose_partials[3u * p];
        g1 = g1 + pose_partials[3u * p + 1u];
        g2 = g2 + pose_partials[3u * p + 2u];
    }
    pose_step(g0, g1, g2);
}

// g0..g2: the rows of [dL/dR' | dL/dt']
fn pose_step(g0: vec4<f32>, g1: vec4<f32>, g2: vec4<f32>) {
    let w = vec3<f32>(delta(3u), delta(4u), delta(5u));
    let t = vec3<f32>(pp.w0.w, pp.w1.w, pp.w2.w);
    // dL/dexp(ω) = G_R·Rᵀ + g_t·tᵀ (rows), with R the loaded rotation (rows w0..w2)
    let rr = mat3x3<f32>(pp.w0.xyz, pp.w1.xyz, pp.w2.xyz);   // columns = rows of R = columns of Rᵀ
    let gr = transpose(mat3x3<f32>(g0.xyz, g1.xyz, g2.xyz));   // G_R (columns)
    let gt = vec3<f32>(g0.w, g1.w, g2.w);
    let ge = gr * rr;
    let gexp = mat3x3<f32>(ge[0] + gt * t.x, ge[1] + gt * t.y, ge[2] + gt * t.z);
    // dL/dω = J_lᵀ·v, M = exp(ω)·Gᵀ, v = (M12 − M21, M20 − M02, M01 − M10) (M[col][row] in WGSL)
    let m = so3_series(w, false) * transpose(gexp);
    let v = vec3<f32>(m[2][1] - m[1][2], m[0][2] - m[2][0], m[1][0] - m[0][1]);
    let gw = transpose(so3_series(w, true)) * v;
    var g: array<f32, 6>;
    g[0] = gt.x;
    g[1] = gt.y;
    g[2] = gt.z;
    g[3] = gw.x;
    g[4] = gw.y;
    g[5] = gw.z;
    let base = pp.dims.x * 3u * FLOATS;
    let b1 = pp.adam.z;
    let b2 = pp.adam.w;
    for (var k = 0u; k < FLOATS; k = k + 1u) {
        let mv = adam_moments(g[k], pose_state[base + FLOATS + k],
                              pose_state[base + 2u * FLOATS + k], 1.0 - b1, b2, 1.0 - b2);
        pose_state[base + FLOATS + k] = mv.m;
        pose_state[base + 2u * FLOATS + k] = mv.v;
        let rate = select(1.0, pp.misc.y, k < 3u) * pp.adam.x;
        pose_state[base + k] = adam_view_step(pose_state[base + k], mv, rate, pp.adam.y, pp.misc.x);
    }
}
