// SSIM pieces shared by the two loss kernels (loss.wgsl for GPUs, loss_lines.wgsl for CPU
// adapters). Math: wgsl_splat/reference/loss.py (loss_and_grad).

// The loss stage's parameter block (wgsl_splat/gpu/loss.py writes one per result slot); the
// line-sliding kernels ignore the tile counts.
struct LossParams {
    dims: vec4<u32>,   // width, height, tiles_x, tiles_y
    misc: vec4<u32>,   // result slot, number of partials (tiles), 0, 0
    coef: vec4<f32>,   // λ, 1 / (H·W·3), C1, C2
}

// Normalised 1D Gaussian window (σ = 1.5), w0 = w10 ... w5 = centre; substituted by the host from
// gaussian_window_1d() so that both paths use the same weights.
const W0: f32 = {{W0}};
const W1: f32 = {{W1}};
const W2: f32 = {{W2}};
const W3: f32 = {{W3}};
const W4: f32 = {{W4}};
const W5: f32 = {{W5}};

// Masks (docs/design.md §2): a target value below zero marks a masked pixel channel (the host
// encodes the mask into the target it uploads). The loss sees both images zeroed there, and the
// gradient there is zero: x' = m·x, y' = m·y, dL/dx = m·dL/dx'.
fn masked_pair(x: f32, y: f32) -> vec2<f32> {
    return select(vec2<f32>(x, y), vec2<f32>(0.0), y < 0.0);
}

struct SsimPixel {
    d: vec3<f32>,     // ∂s/∂μ1, ∂s/∂e11, ∂s/∂e12 (σ's dependence on μ1 included)
    dssim: f32,       // 1 - s, computed directly (better than 1 - mean(s) when SSIM is near 1)
}

// SSIM of one pixel and channel from its window sums: stats = (μ1, μ2, e11, e22) with e11 = G*x²,
// e22 = G*y², and e12 = G*(x·y); σ1² = e11 - μ1², σ12 = e12 - μ1μ2.
fn ssim_pixel(stats: vec4<f32>, e12: f32, c1: f32, c2: f32) -> SsimPixel {
    let mu1 = stats.x;
    let mu2 = stats.y;
    let mu12 = mu1 * mu2;
    let a1 = 2.0 * mu12 + c1;
    let a2 = 2.0 * (e12 - mu12) + c2;
    let b1 = mu1 * mu1 + mu2 * mu2 + c1;
    let b2 = (stats.z - mu1 * mu1) + (stats.w - mu2 * mu2) + c2;
    let inv_b = 1.0 / (b1 * b2);
    let s = a1 * a2 * inv_b;
    let d_e11 = -s / b2;
    let d_e12 = 2.0 * a1 * inv_b;
    let d_m1 = 2.0 * mu2 * a2 * inv_b - 2.0 * mu1 * s / b1 - 2.0 * mu1 * d_e11 - mu2 * d_e12;
    return SsimPixel(vec3<f32>(d_m1, d_e11, d_e12), (b1 * b2 - a1 * a2) * inv_b);
}
