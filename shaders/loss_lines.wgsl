// Stage 7, line-sliding variant for CPU adapters (lavapipe/llvmpipe, SwiftShader, WARP): the same
// loss and gradient as loss.wgsl (see there and wgsl_splat/reference/loss.py), laid out for how a
// CPU driver runs compute shaders: invocations are SIMD lanes, every workgroupBarrier switches
// between coroutines (measured ~18 us per barrier for a 256-thread workgroup on lavapipe) and every
// buffer or workgroup-memory access is a per-lane gather/scatter. So: no workgroup memory, no
// barriers, and each value read as few times as possible. One thread owns a whole row (horizontal
// passes) or column (vertical passes) of one channel and slides the 11-tap window along it,
// keeping the window in registers; each input element is read once per pass.
//
//   lines_h_stats : thread (row, channel): horizontal window sums of (x, y, x², y², xy) -> hbuf;
//                   sum |x - y| of its row -> partials[thread]
//   lines_v_ssim  : thread (column, channel): vertical sums, SSIM and ∂s/∂μ1, ∂s/∂e11, ∂s/∂e12
//                   -> dmaps; sum of (1 - s) of its column -> partials[3H + thread]
//   lines_h_back  : thread (row, channel): horizontal sums of the three d-maps -> hbuf
//   lines_v_back  : thread (column, channel): vertical sums, combine with x, y and sign(x - y)
//                   -> grad; invocation 0 also sums the partials (fixed order) -> result[slot]
//
// Buffers are planar per quantity, each plane in the image layout (H*W*3, RGB interleaved):
// element (y, x, c) of plane s is s*NP + (y*W + x)*3 + c, NP = H*W*3.

@group(0) @binding(0) var<uniform> lp: LossParams;  // dynamic
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read> target_img: array<f32>;
@group(0) @binding(3) var<storage, read_write> hbuf: array<f32>;
@group(0) @binding(4) var<storage, read_write> dmaps: array<f32>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;
@group(0) @binding(6) var<storage, read_write> grad: array<f32>;
@group(0) @binding(7) var<storage, read_write> result: array<vec4<f32>>;

const WG: u32 = 32u;

#include "ssim.wgsl"

// A window tap of the forward statistics: (x, y, x², y²) and xy.
struct S5 {
    a: vec4<f32>,
    b: f32,
}

fn s5_of(x: f32, y: f32) -> S5 {
    return S5(vec4<f32>(x, y, x * x, y * y), x * y);
}

// Symmetric 11-tap window sum: w0·(v0 + v10) + ... + w4·(v4 + v6) + w5·v5.
fn wsum5(v0: S5, v1: S5, v2: S5, v3: S5, v4: S5, v5: S5, v6: S5, v7: S5, v8: S5, v9: S5,
         v10: S5) -> S5 {
    let a = W0 * (v0.a + v10.a) + W1 * (v1.a + v9.a) + W2 * (v2.a + v8.a) + W3 * (v3.a + v7.a)
          + W4 * (v4.a + v6.a) + W5 * v5.a;
    let b = W0 * (v0.b + v10.b) + W1 * (v1.b + v9.b) + W2 * (v2.b + v8.b) + W3 * (v3.b + v7.b)
          + W4 * (v4.b + v6.b) + W5 * v5.b;
    return S5(a, b);
}

fn wsum3(v0: vec3<f32>, v1: vec3<f32>, v2: vec3<f32>, v3: vec3<f32>, v4: vec3<f32>,
         v5: vec3<f32>, v6: vec3<f32>, v7: vec3<f32>, v8: vec3<f32>, v9: vec3<f32>,
         v10: vec3<f32>) -> vec3<f32> {
    return W0 * (v0 + v10) + W1 * (v1 + v9) + W2 * (v2 + v8) + W3 * (v3 + v7)
         + W4 * (v4 + v6) + W5 * v5;
}

fn thread_id(gid: vec3<u32>) -> u32 {
    return gid.x;
}

// ---- horizontal statistics ------------------------------------------------------------------

fn load_s5(i: u32) -> S5 {
    return s5_of(image[i], target_img[i]);
}

@compute @workgroup_size(32)
fn lines_h_stats(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let t = thread_id(gid);
    if (t >= 3u * height) {
        return;
    }
    let np = width * height * 3u;
    let c = t % 3u;
    let y = t / 3u;
    let row = y * width * 3u + c;          // element of (y, 0, c); pixel x at row + 3x
    let zero = S5(vec4<f32>(0.0), 0.0);
    // Window taps v0..v10 = pixels x-5 .. x+5 (zero outside the image).
    var v0 = zero; var v1 = zero; var v2 = zero; var v3 = zero; var v4 = zero;
    var v5 = zero; var v6 = zero; var v7 = zero; var v8 = zero; var v9 = zero;
    if (width > 0u) { v5 = load_s5(row); }
    if (width > 1u) { v6 = load_s5(row + 3u); }
    if (width > 2u) { v7 = load_s5(row + 6u); }
    if (width > 3u) { v8 = load_s5(row + 9u); }
    if (width > 4u) { v9 = load_s5(row + 12u); }
    var l1 = 0.0;
    for (var x = 0u; x < width; x = x + 1u) {
        var v10 = zero;
        if (x + 5u < width) {
            v10 = load_s5(row + 3u * (x + 5u));
        }
        let s = wsum5(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10);
        let o = row + 3u * x;
        hbuf[o] = s.a.x;
        hbuf[o + np] = s.a.y;
        hbuf[o + 2u * np] = s.a.z;
        hbuf[o + 3u * np] = s.a.w;
        hbuf[o + 4u * np] = s.b;
        l1 = l1 + abs(v5.a.x - v5.a.y);
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5;
        v5 = v6; v6 = v7; v7 = v8; v8 = v9; v9 = v10;
    }
    partials[t] = l1;
}

// ---- vertical statistics, SSIM and its derivatives -------------------------------------------

fn load_h5(i: u32, np: u32) -> S5 {
    return S5(vec4<f32>(hbuf[i], hbuf[i + np], hbuf[i + 2u * np], hbuf[i + 3u * np]),
              hbuf[i + 4u * np]);
}

@compute @workgroup_size(32)
fn lines_v_ssim(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let t = thread_id(gid);
    if (t >= 3u * width) {
        return;
    }
    let np = width * height * 3u;
    let stride = width * 3u;               // one row
    let col = t;                           // element of (0, x, c) = 3x + c = t
    let c1 = lp.coef.z;
    let c2 = lp.coef.w;
    let zero = S5(vec4<f32>(0.0), 0.0);
    var v0 = zero; var v1 = zero; var v2 = zero; var v3 = zero; var v4 = zero;
    var v5 = zero; var v6 = zero; var v7 = zero; var v8 = zero; var v9 = zero;
    if (height > 0u) { v5 = load_h5(col, np); }
    if (height > 1u) { v6 = load_h5(col + stride, np); }
    if (height > 2u) { v7 = load_h5(col + 2u * stride, np); }
    if (height > 3u) { v8 = load_h5(col + 3u * stride, np); }
    if (height > 4u) { v9 = load_h5(col + 4u * stride, np); }
    var dssim = 0.0;
    for (var y = 0u; y < height; y = y + 1u) {
        var v10 = zero;
        if (y + 5u < height) {
            v10 = load_h5(col + (y + 5u) * stride, np);
        }
        let w = wsum5(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10);
        let sp = ssim_pixel(w.a, w.b, c1, c2);
        let o = col + y * stride;
        dmaps[o] = sp.d.x;
        dmaps[o + np] = sp.d.y;
        dmaps[o + 2u * np] = sp.d.z;
        dssim = dssim + sp.dssim;
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5;
        v5 = v6; v6 = v7; v7 = v8; v8 = v9; v9 = v10;
    }
    partials[3u * height + t] = dssim;
}

// ---- backward: the same window over the d-maps ----------------------------------------------

fn load_d3(i: u32, np: u32) -> vec3<f32> {
    return vec3<f32>(dmaps[i], dmaps[i + np], dmaps[i + 2u * np]);
}

@compute @workgroup_size(32)
fn lines_h_back(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let t = thread_id(gid);
    if (t >= 3u * height) {
        return;
    }
    let np = width * height * 3u;
    let row = (t / 3u) * width * 3u + t % 3u;
    let zero = vec3<f32>(0.0);
    var v0 = zero; var v1 = zero; var v2 = zero; var v3 = zero; var v4 = zero;
    var v5 = zero; var v6 = zero; var v7 = zero; var v8 = zero; var v9 = zero;
    if (width > 0u) { v5 = load_d3(row, np); }
    if (width > 1u) { v6 = load_d3(row + 3u, np); }
    if (width > 2u) { v7 = load_d3(row + 6u, np); }
    if (width > 3u) { v8 = load_d3(row + 9u, np); }
    if (width > 4u) { v9 = load_d3(row + 12u, np); }
    for (var x = 0u; x < width; x = x + 1u) {
        var v10 = zero;
        if (x + 5u < width) {
            v10 = load_d3(row + 3u * (x + 5u), np);
        }
        let s = wsum3(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10);
        let o = row + 3u * x;
        hbuf[o] = s.x;
        hbuf[o + np] = s.y;
        hbuf[o + 2u * np] = s.z;
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5;
        v5 = v6; v6 = v7; v7 = v8; v8 = v9; v9 = v10;
    }
}

fn load_hb3(i: u32, np: u32) -> vec3<f32> {
    return vec3<f32>(hbuf[i], hbuf[i + np], hbuf[i + 2u * np]);
}

@compute @workgroup_size(32)
fn lines_v_back(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let t = thread_id(gid);
    let lam = lp.coef.x;
    let inv_n = lp.coef.y;
    if (t == 0u) {
        // Scalar results: the partial sums in a fixed order (deterministic), one invocation.
        var l1 = 0.0;
        for (var i = 0u; i < 3u * height; i = i + 1u) {
            l1 = l1 + partials[i];
        }
        var ds = 0.0;
        for (var i = 0u; i < 3u * width; i = i + 1u) {
            ds = ds + partials[3u * height + i];
        }
        l1 = l1 * inv_n;
        ds = ds * inv_n;
        result[lp.misc.x] = vec4<f32>((1.0 - lam) * l1 + lam * ds, l1, 1.0 - ds, ds);
    }
    if (t >= 3u * width) {
        return;
    }
    let np = width * height * 3u;
    let stride = width * 3u;
    let col = t;
    let scale = lam * inv_n;
    let l1_scale = (1.0 - lam) * inv_n;
    let zero = vec3<f32>(0.0);
    var v0 = zero; var v1 = zero; var v2 = zero; var v3 = zero; var v4 = zero;
    var v5 = zero; var v6 = zero; var v7 = zero; var v8 = zero; var v9 = zero;
    if (height > 0u) { v5 = load_hb3(col, np); }
    if (height > 1u) { v6 = load_hb3(col + stride, np); }
    if (height > 2u) { v7 = load_hb3(col + 2u * stride, np); }
    if (height > 3u) { v8 = load_hb3(col + 3u * stride, np); }
    if (height > 4u) { v9 = load_hb3(col + 4u * stride, np); }
    for (var y = 0u; y < height; y = y + 1u) {
        var v10 = zero;
        if (y + 5u < height) {
            v10 = load_hb3(col + (y + 5u) * stride, np);
        }
        let g3 = wsum3(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10);
        let o = col + y * stride;
        let x = image[o];
        let yv = target_img[o];
        grad[o] = -scale * (g3.x + 2.0 * x * g3.y + yv * g3.z) + l1_scale * sign(x - yv);
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5;
        v5 = v6; v6 = v7; v7 = v8; v8 = v9; v9 = v10;
    }
}
