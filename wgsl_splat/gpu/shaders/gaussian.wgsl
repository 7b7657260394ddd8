// Per-Gaussian geometry shared by projection (project.wgsl) and its backward pass
// (project_backward.wgsl), so both evaluate exactly the same expressions. The including module
// declares `rp: RenderParams`, `params: array<f32>` (the flat parameter buffer) and
// `filter3d: array<f32>` (the antialiased mode's per-Gaussian 3D filter; unread in the classic mode).

fn quat_to_rotmat(q: vec4<f32>) -> mat3x3<f32> {
    // q = (w, x, y, z), already normalised. Returns R; WGSL matrices are built from columns.
    let w = q.x;
    let x = q.y;
    let y = q.z;
    let z = q.w;
    return mat3x3<f32>(
        vec3<f32>(1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y)),
        vec3<f32>(2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x)),
        vec3<f32>(2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y)));
}

fn param_vec3(o: u32) -> vec3<f32> {
    return vec3<f32>(params[o], params[o + 1u], params[o + 2u]);
}

fn param_vec4(o: u32) -> vec4<f32> {
    return vec4<f32>(params[o], params[o + 1u], params[o + 2u], params[o + 3u]);
}

// SH coefficient c of the splat whose coefficients start at params[base] (coefficient-major).
fn sh_coeff(base: u32, c: u32) -> vec3<f32> {
    return param_vec3(base + 3u * c);
}

fn gaussian_mean(i: u32) -> vec3<f32> {
    return param_vec3(3u * i);
}

// NaN or ±Inf, told from the bits (exponent all ones). Float compares cannot be trusted with them:
// Metal compiles with fast math by default, which assumes no NaN or Inf and may fold
// `x >= near` or `det > 0.0` to either answer; an integer test on the bits is kept as written.
fn nonfinite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}

fn any_nonfinite3(v: vec3<f32>) -> bool {
    return nonfinite(v.x) || nonfinite(v.y) || nonfinite(v.z);
}

// Whether Gaussian i (``mean``: its mean as loaded) describes a Gaussian at all: mean, log-scales,
// quaternion and opacity logit finite, the quaternion not zero (reference: projection.valid_rows).
// Tested on the words loaded from memory; an invalid one is culled, never rasterised.
fn gaussian_valid(i: u32, mean: vec3<f32>) -> bool {
    let q = param_vec4(rp.offs.y + 4u * i);
    let qbits = (bitcast<u32>(q.x) | bitcast<u32>(q.y) | bitcast<u32>(q.z) | bitcast<u32>(q.w))
                & 0x7fffffffu;
    return !any_nonfinite3(mean) && !any_nonfinite3(param_vec3(rp.offs.x + 3u * i))
        && !any_nonfinite3(q.xyz) && !nonfinite(q.w) && qbits != 0u
        && !nonfinite(params[rp.offs.z + i]);
}

fn camera_space(mean: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(dot(rp.w2c0.xyz, mean) + rp.w2c0.w,
                     dot(rp.w2c1.xyz, mean) + rp.w2c1.w,
                     dot(rp.w2c2.xyz, mean) + rp.w2c2.w);
}

// The SH layout as pipeline constants, not uniforms (the renderer keeps a pipeline per layout):
// lavapipe recompiles a shader whose branches or loops depend on a uniform at every dispatch, to
// inline the value (from its disk cache; measured 1.8 ms per dispatch of project.wgsl and 2.8 ms of
// project_backward.wgsl, whatever N), while these change only with the model and every 1000 steps.
override SH_COEFFS: u32 = 16u;   // K, coefficients stored per Gaussian (= rp.model.y)
override SH_ACTIVE: u32 = 3u;    // the active SH degree (= rp.model.z)

// SH degree actually evaluated: the active degree, capped by the stored coefficients.
fn active_degree() -> u32 {
    return min(min(SH_ACTIVE, 3u), u32(sqrt(f32(SH_COEFFS))) - 1u);
}

// EWA projection terms of Gaussian i whose camera-space mean is t (t.z >= near plane).
struct Ewa {
    qn: vec4<f32>,          // normalised quaternion
    qnorm: f32,             // |q| before normalisation
    rot: mat3x3<f32>,       // R (columns)
    scale: vec3<f32>,       // exp(log-scales)
    filt: f32,              // 3D filter f (antialiased mode; 0 in the classic mode)
    scale3: vec3<f32>,      // scales of Σ + f²I: sqrt(scale² + f²) (= scale in the classic mode)
    m: mat3x3<f32>,         // M = R S (columns), S = diag(scale3); Σ = M Mᵀ
    u: vec2<f32>,           // t.x / t.z, t.y / t.z (unclamped)
    uc: vec2<f32>,          // the same clamped to ±1.3 tan(half fov)
    t0: vec3<f32>,          // rows of J W (J evaluated at the clamped tangent)
    t1: vec3<f32>,
    a0: vec3<f32>,          // rows of A = J W M; Σ2D = A Aᵀ + COV2D_DILATION I
    a1: vec3<f32>,
    cov: vec3<f32>,         // (a, b, c) of Σ2D = [[a, b], [b, c]], dilation included
}

fn ewa_terms(i: u32, t: vec3<f32>) -> Ewa {
    var e: Ewa;
    let q = param_vec4(rp.offs.y + 4u * i);
    e.qnorm = length(q);
    e.qn = q / e.qnorm;
    e.rot = quat_to_rotmat(e.qn);
    e.scale = exp(param_vec3(rp.offs.x + 3u * i));
    e.filt = 0.0;
    e.scale3 = e.scale;
    if (ANTIALIASED) {
        e.filt = filter3d[i];
        e.scale3 = sqrt(e.scale * e.scale + vec3<f32>(e.filt * e.filt));
    }
    e.m = mat3x3<f32>(e.rot[0] * e.scale3.x, e.rot[1] * e.scale3.y, e.rot[2] * e.scale3.z);
    let fx = rp.focal.x;
    let fy = rp.focal.y;
    let tz = t.z;
    e.u = t.xy / tz;
    e.uc = clamp(e.u, -rp.clip.xy, rp.clip.xy);
    // J = [[fx/z, 0, -fx·uc.x/z], [0, fy/z, -fy·uc.y/z]]; rows of J W:
    e.t0 = (fx / tz) * rp.w2c0.xyz - (fx * e.uc.x / tz) * rp.w2c2.xyz;
    e.t1 = (fy / tz) * rp.w2c1.xyz - (fy * e.uc.y / tz) * rp.w2c2.xyz;
    e.a0 = e.t0 * e.m;   // row vector times matrix: (t0·m[0], t0·m[1], t0·m[2])
    e.a1 = e.t1 * e.m;
    e.cov = vec3<f32>(dot(e.a0, e.a0) + COV2D_DILATION, dot(e.a0, e.a1),
                      dot(e.a1, e.a1) + COV2D_DILATION);
    return e;
}

// Antialiased mode (Mip-Splatting; math in wgsl_splat/reference/projection.py). The 3D filter's
// opacity factor sqrt(det Σ / det(Σ + f²I)) = Π scale / scale3.
fn filter3d_compensation(e: Ewa) -> f32 {
    let r = e.scale / e.scale3;
    return r.x * r.y * r.z;
}

// The 2D Mip filter's opacity factor sqrt(det Σ2D / det(Σ2D + εI)), Σ2D = A Aᵀ before the
// dilation ε; `det` is the dilated determinant (> 0), 0 for a degenerate projection.
fn filter2d_compensation(e: Ewa, det: f32) -> f32 {
    let a = dot(e.a0, e.a0);
    let b = dot(e.a0, e.a1);
    let c = dot(e.a1, e.a1);
    return sqrt(max((a * c - b * b) / det, 0.0));
}
