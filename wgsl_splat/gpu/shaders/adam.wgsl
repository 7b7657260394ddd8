// docs/design.md §3 stage 9: Adam in place on the device-resident parameters (docs/design.md §2; reference
// wgsl_splat/optim.py adam_step, i.e. torch.optim.Adam without weight decay or amsgrad).
//
// One dispatch over every parameter group: params, grads, m and v are flat float32 buffers with the
// same layout, described by up to MAX_SEGMENTS segments [start, end) of the uniform. Element j of a
// segment uses step size a when (j - start) mod period < split, b otherwise: this is how the SH
// block (N, K, 3) is split into the DC rate (first 3 floats of every 3K) and the rest rate; the
// other segments have period = split = 1. Step sizes are lr / (1 - β1^t), precomputed by the host
// in float64 and rounded to f32 as the NumPy reference does; the update of each float is
// adam_update.wgsl's (the reference's operation order, torch's).
//
// The buffers are bound as array<vec4<f32>> (pool buffers are multiples of 256 bytes): one thread
// per 4 consecutive floats, one workgroup per block of 1024 floats; the grid is 2D past 65 535
// workgroups. The host's block table (blocks[workgroup]) says which segment a block lies in and
// the block's phase within the SH period, so the segment is workgroup-uniform and found without
// any per-element search; only the few blocks that straddle a boundary, a gap or the end (MIXED)
// look the segment up per lane. (Measured on lavapipe: one float per thread was 3x slower and a
// per-lane segment search 3x slower again.) Lanes outside every segment are left untouched.
// With ZERO_GRAD the gradient is cleared after it is read, so the next step's backward pass can
// accumulate into it without a separate clear.

#include "adam_update.wgsl"

override ZERO_GRAD: bool = true;

const MAX_SEGMENTS: u32 = 8u;
const WG: u32 = 256u;

struct AdamParams {
    sizes: vec4<u32>,     // total elements, number of segments, workgroups per grid row, 0
    hyper: vec4<f32>,     // 1 - β1, β2, 1 - β2, eps
    hyper2: vec4<f32>,    // sqrt(1 - β2^t), gradient scale (1/B for a batch of B views), 0, 0
    seg: array<vec4<u32>, 8>,   // start, end, period, split
    lr: array<vec4<f32>, 8>,    // step size a, step size b, 1 / period, 0
}

@group(0) @binding(0) var<uniform> ap: AdamParams;
@group(0) @binding(1) var<storage, read_write> params: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> grads: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> m1: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m2: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> blocks: array<vec2<u32>>;

const MIXED: u32 = 0xffffffffu;

// r mod p for 0 <= r < 2^20 without an integer division (slow on CPU drivers): float quotient
// estimate (off by at most one), then one correction.
fn small_mod(r: vec4<u32>, p: u32, inv_p: f32) -> vec4<u32> {
    let pi = vec4<i32>(i32(p));
    var x = vec4<i32>(r) - vec4<i32>(floor(vec4<f32>(r) * inv_p)) * pi;
    x = select(x, x - pi, x >= pi);
    x = select(x, x + pi, x < vec4<i32>(0));
    return vec4<u32>(x);
}

// Per-lane segment and step size, for the few blocks that straddle a segment boundary, a gap or
// the end of the parameters.
fn lookup_mixed(idx: vec4<u32>, valid: ptr<function, vec4<bool>>) -> vec4<f32> {
    var step_size = vec4<f32>(0.0);
    var ok = vec4<bool>(false);
    for (var q = 0u; q < ap.sizes.y; q = q + 1u) {
        let sg = ap.seg[q];
        let lr = ap.lr[q];
        let inseg = (idx >= vec4<u32>(sg.x)) & (idx < vec4<u32>(sg.y));
        let j = select(vec4<u32>(0u), idx - vec4<u32>(sg.x), inseg);
        var st = vec4<f32>(lr.x);
        if (sg.z > 1u) {
            st = select(vec4<f32>(lr.y), st, j % vec4<u32>(sg.z) < vec4<u32>(sg.w));
        }
        step_size = select(step_size, st, inseg);
        ok = ok | inseg;
    }
    *valid = ok;
    return step_size;
}

// One float's update: (parameter, m, v).
fn lane(p: f32, g: f32, m: f32, v: f32, step_size: f32) -> vec3<f32> {
    let mv = adam_moments(g, m, v, ap.hyper.x, ap.hyper.y, ap.hyper.z);
    return vec3<f32>(adam_param_step(p, mv, step_size, ap.hyper2.x, ap.hyper.w), mv.m, mv.v);
}

@compute @workgroup_size(WG)
fn adam_step(@builtin(local_invocation_index) li: u32,
             @builtin(workgroup_id) wid: vec3<u32>) {
    let wg = wid.x + wid.y * ap.sizes.z;
    let i = wg * WG + li;     // vec4 index
    let base = 4u * i;
    if (base >= ap.sizes.x) {
        return;
    }
    let blk = blocks[wg];
    var step_size: vec4<f32>;
    var valid = vec4<bool>(true);
    if (blk.x != MIXED) {
        // The whole block lies in segment blk.x; blk.y = (block start - segment start) mod period.
        let sg = ap.seg[blk.x];
        let lr = ap.lr[blk.x];
        step_size = vec4<f32>(lr.x);
        if (sg.z > 1u) {
            let r = small_mod(vec4<u32>(blk.y + 4u * li) + vec4<u32>(0u, 1u, 2u, 3u), sg.z, lr.z);
            step_size = select(vec4<f32>(lr.y), step_size, r < vec4<u32>(sg.w));
        }
    } else {
        step_size = lookup_mixed(vec4<u32>(base) + vec4<u32>(0u, 1u, 2u, 3u), &valid);
    }
    let g_sum = grads[i];
    let g = g_sum * ap.hyper2.y;
    let m_old = m1[i];
    let v_old = m2[i];
    let p_old = params[i];
    let l0 = lane(p_old.x, g.x, m_old.x, v_old.x, step_size.x);
    let l1 = lane(p_old.y, g.y, m_old.y, v_old.y, step_size.y);
    let l2 = lane(p_old.z, g.z, m_old.z, v_old.z, step_size.z);
    let l3 = lane(p_old.w, g.w, m_old.w, v_old.w, step_size.w);
    // Lanes outside every segment (layout gaps, the tail of the last vec4) keep their values.
    params[i] = select(p_old, vec4<f32>(l0.x, l1.x, l2.x, l3.x), valid);
    m1[i] = select(m_old, vec4<f32>(l0.y, l1.y, l2.y, l3.y), valid);
    m2[i] = select(v_old, vec4<f32>(l0.z, l1.z, l2.z, l3.z), valid);
    if (ZERO_GRAD) {
        grads[i] = select(g_sum, vec4<f32>(0.0), valid);
    }
}
