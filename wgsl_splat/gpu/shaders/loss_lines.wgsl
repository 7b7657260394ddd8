// docs/design.md §3 stage 5, line-sliding variant for CPU adapters (lavapipe/llvmpipe, SwiftShader, WARP): the same
// loss and gradient as loss.wgsl (see there and wgsl_splat/reference/loss.py), laid out for how a
// CPU driver runs compute shaders: invocations are SIMD lanes, every workgroupBarrier switches
// between coroutines (measured ~18 us per barrier for a 256-thread workgroup on lavapipe) and every
// buffer access is a loop over the lanes (lavapipe: ~2.6 ns per lane for an f32, ~4.5 ns for a
// vec4, so a vec4 moves four values for the price of two). So: no workgroup memory, no barriers,
// few accesses, vec4 where a thread's values belong together. One thread owns a whole column
// (vertical passes) or row (horizontal pass) of one channel and slides the 11-tap window along it,
// keeping the window in registers; each input element is read once per pass.
//
//   lines_v_stats : thread (column, channel): vertical window sums of (x, y, x², y²) -> vstats
//                   (vec4) and of xy -> vxy (kept in `grad`, which is written last);
//                   sum |x - y| of its column -> partials[thread]
//   lines_h_ssim  : thread (row, channel): horizontal sums of the statistics five pixels ahead,
//                   SSIM there and ∂s/∂μ1, ∂s/∂e11, ∂s/∂e12 (never stored: kept in a second
//                   11-tap window that trails five pixels behind), the horizontal sums of those
//                   three d-maps -> hback (vec4, in place of vstats: a thread writes element x of
//                   its row after it has read every element up to x + 10, and no other thread
//                   touches its row); sum of (1 - s) of its row -> partials[3W + thread]
//   lines_v_grad  : thread (column, channel): vertical sums of hback, combined with x, y and
//                   sign(x - y) -> grad; invocation 0 also sums the partials (fixed order) -> result
//
// Three dispatches; per pixel and channel 2 + 2 + 3 loads and 2 + 1 + 1 stores (the four-pass
// version with scalar planes needed 15 loads and 12 stores). Intermediate buffers are indexed like
// the image (H*W*3, RGB interleaved): element (y, x, c) at (y*W + x)*3 + c. The scratch is one
// vec4 per element (48 bytes a pixel) besides the gradient.

@group(0) @binding(0) var<uniform> lp: LossParams;  // dynamic
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read> target_img: array<f32>;
@group(0) @binding(3) var<storage, read_write> vstats: array<vec4<f32>>;   // then hback
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;
@group(0) @binding(7) var<storage, read_write> grad: array<f32>;
@group(0) @binding(8) var<storage, read_write> result: array<vec4<f32>>;

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

// ---- vertical statistics ---------------------------------------------------------------------

// Input pixel (row y of the column starting at element col) as a window tap; zero outside.
fn load_s5(col: u32, y: u32, height: u32, stride: u32) -> S5 {
    if (y >= height) {
        return S5(vec4<f32>(0.0), 0.0);
    }
    let i = col + y * stride;
    let xy = masked_pair(image[i], target_img[i]);
    return s5_of(xy.x, xy.y);
}

@compute @workgroup_size(WG)
fn lines_v_stats(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let col = gid.x;                       // element (0, x, c) = 3x + c
    if (col >= 3u * width) {
        return;
    }
    let stride = 3u * width;               // one row
    let zero = S5(vec4<f32>(0.0), 0.0);
    // Window taps v0..v10 = rows y-5 .. y+5 (zero outside the image).
    var v0 = zero; var v1 = zero; var v2 = zero; var v3 = zero; var v4 = zero;
    var v5 = load_s5(col, 0u, height, stride);
    var v6 = load_s5(col, 1u, height, stride);
    var v7 = load_s5(col, 2u, height, stride);
    var v8 = load_s5(col, 3u, height, stride);
    var v9 = load_s5(col, 4u, height, stride);
    var l1 = 0.0;
    for (var y = 0u; y < height; y = y + 1u) {
        let v10 = load_s5(col, y + 5u, height, stride);
        let s = wsum5(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10);
        let o = col + y * stride;
        vstats[o] = s.a;
        grad[o] = s.b;                     // vxy
        l1 = l1 + abs(v5.a.x - v5.a.y);
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5;
        v5 = v6; v6 = v7; v7 = v8; v8 = v9; v9 = v10;
    }
    partials[col] = l1;
}

// ---- horizontal statistics, SSIM, d-maps and their horizontal sums ---------------------------

fn load_v5(row: u32, x: u32, width: u32) -> S5 {
    if (x >= width) {
        return S5(vec4<f32>(0.0), 0.0);
    }
    let i = row + 3u * x;
    return S5(vstats[i], grad[i]);
}

@compute @workgroup_size(WG)
fn lines_h_ssim(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let t = gid.x;
    if (t >= 3u * height) {
        return;
    }
    let row = (t / 3u) * width * 3u + t % 3u;    // element (y, 0, c); pixel x at row + 3x
    let c1 = lp.coef.z;
    let c2 = lp.coef.w;
    let zero = S5(vec4<f32>(0.0), 0.0);
    let z3 = vec3<f32>(0.0);
    // Statistics taps s0..s10 = columns x .. x+10 (SSIM at x+5); d-map taps d0..d10 = columns
    // x-5 .. x+5 (output at x). Both zero outside the image (the d-maps exist only inside it).
    var s0 = zero; var s1 = zero; var s2 = zero; var s3 = zero; var s4 = zero;
    var s5 = load_v5(row, 0u, width);
    var s6 = load_v5(row, 1u, width);
    var s7 = load_v5(row, 2u, width);
    var s8 = load_v5(row, 3u, width);
    var s9 = load_v5(row, 4u, width);
    var d0 = z3; var d1 = z3; var d2 = z3; var d3 = z3; var d4 = z3;
    var d5 = z3; var d6 = z3; var d7 = z3; var d8 = z3; var d9 = z3;
    var dssim = 0.0;
    // Prologue: the d-maps of columns 0..4 (d5..d9 before the first output).
    for (var x = 0u; x < 5u; x = x + 1u) {
        let s10 = load_v5(row, x + 5u, width);
        var d = z3;
        if (x < width) {
            let w = wsum5(s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10);
            let sp = ssim_pixel(w.a, w.b, c1, c2);
            d = sp.d;
            dssim = dssim + sp.dssim;
        }
        d5 = d6; d6 = d7; d7 = d8; d8 = d9; d9 = d;
        s0 = s1; s1 = s2; s2 = s3; s3 = s4; s4 = s5;
        s5 = s6; s6 = s7; s7 = s8; s8 = s9; s9 = s10;
    }
    for (var x = 0u; x < width; x = x + 1u) {
        // SSIM at column x + 5 (statistics window s0..s10 = columns x .. x+10).
        let s10 = load_v5(row, x + 10u, width);
        var d10 = z3;
        if (x + 5u < width) {
            let w = wsum5(s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10);
            let sp = ssim_pixel(w.a, w.b, c1, c2);
            d10 = sp.d;
            dssim = dssim + sp.dssim;
        }
        vstats[row + 3u * x] = vec4<f32>(wsum3(d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10), 0.0);
        d0 = d1; d1 = d2; d2 = d3; d3 = d4; d4 = d5;
        d5 = d6; d6 = d7; d7 = d8; d8 = d9; d9 = d10;
        s0 = s1; s1 = s2; s2 = s3; s3 = s4; s4 = s5;
        s5 = s6; s6 = s7; s7 = s8; s8 = s9; s9 = s10;
    }
    partials[3u * width + t] = dssim;
}

// ---- vertical sums of the d-maps' horizontal sums, the gradient --------------------------------

fn load_hb3(col: u32, y: u32, height: u32, stride: u32) -> vec3<f32> {
    if (y >= height) {
        return vec3<f32>(0.0);
    }
    return vstats[col + y * stride].xyz;      // hback
}

@compute @workgroup_size(WG)
fn lines_v_grad(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let col = gid.x;
    let lam = lp.coef.x;
    let inv_n = lp.coef.y;
    if (col == 0u) {
        // Scalar results: the partial sums in a fixed order (deterministic), one invocation.
        var l1 = 0.0;
        for (var i = 0u; i < 3u * width; i = i + 1u) {
            l1 = l1 + partials[i];
        }
        var ds = 0.0;
        for (var i = 0u; i < 3u * height; i = i + 1u) {
            ds = ds + partials[3u * width + i];
        }
        l1 = l1 * inv_n;
        ds = ds * inv_n;
        result[lp.misc.x] = vec4<f32>((1.0 - lam) * l1 + lam * ds, l1, 1.0 - ds, ds);
    }
    if (col >= 3u * width) {
        return;
    }
    let stride = 3u * width;
    let scale = lam * inv_n;
    let l1_scale = (1.0 - lam) * inv_n;
    let zero = vec3<f32>(0.0);
    var v0 = zero; var v1 = zero; var v2 = zero; var v3 = zero; var v4 = zero;
    var v5 = load_hb3(col, 0u, height, stride);
    var v6 = load_hb3(col, 1u, height, stride);
    var v7 = load_hb3(col, 2u, height, stride);
    var v8 = load_hb3(col, 3u, height, stride);
    var v9 = load_hb3(col, 4u, height, stride);
    for (var y = 0u; y < height; y = y + 1u) {
        let v10 = load_hb3(col, y + 5u, height, stride);
        let g3 = wsum3(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10);
        let o = col + y * stride;
        let x = image[o];
        let yv = target_img[o];
        grad[o] = select(-scale * (g3.x + 2.0 * x * g3.y + yv * g3.z) + l1_scale * sign(x - yv),
                         0.0, yv < 0.0);
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5;
        v5 = v6; v6 = v7; v7 = v8; v8 = v9; v9 = v10;
    }
}
