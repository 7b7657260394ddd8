// docs/design.md §3 stage 5: photometric loss (1-λ)·L1 + λ·(1 - SSIM) and its gradient with respect to the image.
//
// Math: wgsl_splat/reference/loss.py (loss_and_grad), docs/design.md §2. SSIM per channel with an
// 11x11 Gaussian window (σ = 1.5, separable), zero padding, 'same' output, averaged over every pixel
// and channel. Images are the renderer's layout: array<f32> of H*W*3, row-major, RGB interleaved;
// the gradient buffer has the same layout.
//
// Two dispatches of one workgroup per 16x16 pixel tile (tiles_x x tiles_y), 256 threads, each
// channel in turn so that the workgroup memory stays under 16 KiB:
//
//   ssim_forward  : load x, y on the tile + a 5-pixel apron into workgroup memory; horizontal
//                   window sums of (x, y, x², y², xy) on 26 rows x 16 columns; vertical sums;
//                   per pixel the SSIM value and the three partial derivatives of the reference
//                   (∂s/∂μ1, ∂s/∂e11, ∂s/∂e12) -> dmaps (planar, (c*3 + k)*H*W + p); per-workgroup
//                   sums of (1 - s) and |x - y| -> partials[tile] (fixed-order tree reduction).
//   ssim_backward : the same separable window over the three d-maps (the adjoint of a zero-padded
//                   symmetric 'same' correlation is itself), then
//                   dL/dx = -λ/n·(G*∂μ1 + 2x·G*∂e11 + y·G*∂e12) + (1-λ)/n·sign(x - y).
//                   Workgroup (0, 0) first sums the partials in a fixed order (deterministic) and
//                   writes (loss, L1, SSIM, 1-SSIM) to result[slot].
//
// Workgroup memory: 13 728 bytes (forward), 10 816 bytes (backward).
// The window is applied in symmetric form w0·(v[-5] + v[5]) + ... + w5·v[0].

@group(0) @binding(0) var<uniform> lp: LossParams;  // dynamic
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read> target_img: array<f32>;
@group(0) @binding(3) var<storage, read_write> dmaps: array<f32>;
@group(0) @binding(4) var<storage, read_write> partials: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> grad: array<f32>;
@group(0) @binding(6) var<storage, read_write> result: array<vec4<f32>>;

const T: u32 = 16u;          // tile side
const R: u32 = 5u;           // window radius
const A: u32 = 26u;          // tile side + 2 R (apron region side)
const AREA: u32 = 676u;      // A * A
const HROWS: u32 = 416u;     // A rows x T columns of horizontal sums

#include "ssim.wgsl"

// Forward: x, y on the apron region; horizontal sums (x, y, x², y²) and xy.
// Backward: d-maps (∂μ1, ∂e11) and ∂e12 on the apron region; their horizontal sums.
// 5408 + 6656 + 1664 = 13 728 bytes.
var<workgroup> s_a: array<vec2<f32>, 676>;
var<workgroup> s_h4: array<vec4<f32>, 416>;
var<workgroup> s_h1: array<f32, 416>;

fn in_image(ix: i32, iy: i32) -> bool {
    return ix >= 0 && iy >= 0 && ix < i32(lp.dims.x) && iy < i32(lp.dims.y);
}

// ---- forward ----------------------------------------------------------------------------------

struct Stats {
    a: vec4<f32>,   // Σ w·(x, y, x², y²)
    b: f32,         // Σ w·xy
}

fn htap2(acc: Stats, i: u32, j: u32, w: f32) -> Stats {
    let p = s_a[i];
    let q = s_a[j];
    let s4 = vec4<f32>(p.x + q.x, p.y + q.y, p.x * p.x + q.x * q.x, p.y * p.y + q.y * q.y);
    return Stats(acc.a + w * s4, acc.b + w * (p.x * p.y + q.x * q.y));
}

fn vtap2(acc: Stats, i: u32, j: u32, w: f32) -> Stats {
    return Stats(acc.a + w * (s_h4[i] + s_h4[j]), acc.b + w * (s_h1[i] + s_h1[j]));
}

@compute @workgroup_size(16, 16)
fn ssim_forward(@builtin(local_invocation_id) lid: vec3<u32>,
                @builtin(local_invocation_index) li: u32,
                @builtin(workgroup_id) wid: vec3<u32>) {
    let width = lp.dims.x;
    let height = lp.dims.y;
    let npx = width * height;
    let ox = i32(wid.x * T) - i32(R);
    let oy = i32(wid.y * T) - i32(R);
    let px = wid.x * T + lid.x;
    let py = wid.y * T + lid.y;
    let inside = px < width && py < height;
    let pix = py * width + px;
    let c1 = lp.coef.z;
    let c2 = lp.coef.w;
    var sum_dssim = 0.0;
    var sum_l1 = 0.0;

    for (var c = 0u; c < 3u; c = c + 1u) {
        // 1. x, y on the tile and its apron (zero outside the image).
        for (var e = li; e < AREA; e = e + 256u) {
            let ix = ox + i32(e % A);
            let iy = oy + i32(e / A);
            var v = vec2<f32>(0.0);
            if (in_image(ix, iy)) {
                let g = (u32(iy) * width + u32(ix)) * 3u + c;
                v = masked_pair(image[g], target_img[g]);
            }
            s_a[e] = v;
        }
        workgroupBarrier();
        let xy = s_a[(lid.y + R) * A + lid.x + R];   // this thread's pixel (for L1)
        // 2. horizontal window sums of the five statistics, A rows x T columns.
        for (var e = li; e < HROWS; e = e + 256u) {
            let base = (e / T) * A + (e % T);
            var st = Stats(vec4<f32>(0.0), 0.0);
            st = htap2(st, base, base + 10u, W0);
            st = htap2(st, base + 1u, base + 9u, W1);
            st = htap2(st, base + 2u, base + 8u, W2);
            st = htap2(st, base + 3u, base + 7u, W3);
            st = htap2(st, base + 4u, base + 6u, W4);
            let m = s_a[base + 5u];
            st = Stats(st.a + W5 * vec4<f32>(m.x, m.y, m.x * m.x, m.y * m.y), st.b + W5 * (m.x * m.y));
            s_h4[e] = st.a;
            s_h1[e] = st.b;
        }
        workgroupBarrier();
        // 3. vertical sums for this thread's pixel, SSIM and its partial derivatives.
        let b = lid.y * T + lid.x;
        var w = Stats(vec4<f32>(0.0), 0.0);
        w = vtap2(w, b, b + 10u * T, W0);
        w = vtap2(w, b + T, b + 9u * T, W1);
        w = vtap2(w, b + 2u * T, b + 8u * T, W2);
        w = vtap2(w, b + 3u * T, b + 7u * T, W3);
        w = vtap2(w, b + 4u * T, b + 6u * T, W4);
        w = Stats(w.a + W5 * s_h4[b + 5u * T], w.b + W5 * s_h1[b + 5u * T]);
        if (inside) {
            let sp = ssim_pixel(w.a, w.b, c1, c2);
            let base = c * 3u * npx + pix;
            dmaps[base] = sp.d.x;
            dmaps[base + npx] = sp.d.y;
            dmaps[base + 2u * npx] = sp.d.z;
            sum_dssim = sum_dssim + sp.dssim;
            sum_l1 = sum_l1 + abs(xy.x - xy.y);
        }
        // The next channel's step 1 overwrites s_a (not read after step 2's barrier); its step 2
        // overwrites s_h*, which every thread has finished reading by step 1's barrier.
    }

    // Fixed-order tree reduction of the workgroup's sums (reusing s_h4).
    workgroupBarrier();
    s_h4[li] = vec4<f32>(sum_dssim, sum_l1, 0.0, 0.0);
    for (var stride = 128u; stride > 0u; stride = stride >> 1u) {
        workgroupBarrier();
        if (li < stride) {
            s_h4[li] = s_h4[li] + s_h4[li + stride];
        }
    }
    if (li == 0u) {
        partials[wid.y * lp.dims.z + wid.x] = s_h4[0].xy;
    }
}

// ---- backward ---------------------------------------------------------------------------------

// (∂μ1, ∂e11, ∂e12, -) on the apron region; the horizontal sums overwrite its first 416 entries
// (computed into registers first). 10 816 bytes; only ssim_backward uses it (wgpu counts the
// workgroup memory an entry point actually uses).
var<workgroup> s_d: array<vec4<f32>, 676>;

fn hsum_d(r: u32) -> vec4<f32> {
    return W0 * (s_d[r] + s_d[r + 10u]) + W1 * (s_d[r + 1u] + s_d[r + 9u])
         + W2 * (s_d[r + 2u] + s_d[r + 8u]) + W3 * (s_d[r + 3u] + s_d[r + 7u])
         + W4 * (s_d[r + 4u] + s_d[r + 6u]) + W5 * s_d[r + 5u];
}

// Sum of the partials in a fixed order, then (loss, L1, SSIM, 1 - SSIM) -> result[slot].
fn reduce_partials(li: u32) {
    let n = lp.misc.y;
    var acc = vec2<f32>(0.0);
    for (var i = li; i < n; i = i + 256u) {
        acc = acc + partials[i];
    }
    s_d[li] = vec4<f32>(acc, 0.0, 0.0);
    for (var stride = 128u; stride > 0u; stride = stride >> 1u) {
        workgroupBarrier();
        if (li < stride) {
            s_d[li] = s_d[li] + s_d[li + stride];
        }
    }
    if (li == 0u) {
        let lam = lp.coef.x;
        let inv_n = lp.coef.y;
        let dssim = s_d[0].x * inv_n;
        let l1 = s_d[0].y * inv_n;
        result[lp.misc.x] = vec4<f32>((1.0 - lam) * l1 + lam * dssim, l1, 1.0 - dssim, dssim);
    }
    workgroupBarrier();
}

@compute @workgroup_size(16, 16)
fn ssim_backward(@builtin(local_invocation_id) lid: vec3<u32>,
                 @builtin(local_invocation_index) li: u32,
                 @builtin(workgroup_id) wid: vec3<u32>) {
    if (wid.x == 0u && wid.y == 0u) {
        reduce_partials(li);
    }
    let width = lp.dims.x;
    let height = lp.dims.y;
    let npx = width * height;
    let ox = i32(wid.x * T) - i32(R);
    let oy = i32(wid.y * T) - i32(R);
    let px = wid.x * T + lid.x;
    let py = wid.y * T + lid.y;
    let inside = px < width && py < height;
    let pix = py * width + px;
    let scale = lp.coef.x * lp.coef.y;              // λ / n
    let l1_scale = (1.0 - lp.coef.x) * lp.coef.y;   // (1 - λ) / n
    let e1 = li + 256u;                              // this thread's second horizontal output

    for (var c = 0u; c < 3u; c = c + 1u) {
        let base = c * 3u * npx;
        for (var e = li; e < AREA; e = e + 256u) {
            let ix = ox + i32(e % A);
            let iy = oy + i32(e / A);
            var v = vec4<f32>(0.0);
            if (in_image(ix, iy)) {
                let g = base + u32(iy) * width + u32(ix);
                v = vec4<f32>(dmaps[g], dmaps[g + npx], dmaps[g + 2u * npx], 0.0);
            }
            s_d[e] = v;
        }
        workgroupBarrier();
        let h0 = hsum_d((li / T) * A + (li % T));
        var h1 = vec4<f32>(0.0);
        if (e1 < HROWS) {
            h1 = hsum_d((e1 / T) * A + (e1 % T));
        }
        workgroupBarrier();
        s_d[li] = h0;
        if (e1 < HROWS) {
            s_d[e1] = h1;
        }
        workgroupBarrier();
        let b = lid.y * T + lid.x;
        let g3 = W0 * (s_d[b] + s_d[b + 10u * T]) + W1 * (s_d[b + T] + s_d[b + 9u * T])
               + W2 * (s_d[b + 2u * T] + s_d[b + 8u * T]) + W3 * (s_d[b + 3u * T] + s_d[b + 7u * T])
               + W4 * (s_d[b + 4u * T] + s_d[b + 6u * T]) + W5 * s_d[b + 5u * T];
        if (inside) {
            let g = pix * 3u + c;
            let x = image[g];
            let y = target_img[g];
            grad[g] = select(-scale * (g3.x + 2.0 * x * g3.y + y * g3.z) + l1_scale * sign(x - y),
                             0.0, y < 0.0);
        }
        workgroupBarrier();
    }
}
