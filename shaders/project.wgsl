// Stage 1: project every Gaussian (cull, EWA 2D covariance, conic, radius, tile rectangle) and
// evaluate its view-dependent colour from SH. One thread per Gaussian.
// Also seeds the depth sort: depth_keys[i] = bitcast<u32>(depth), ids[i] = i, and counters[4] = N.

#include "common.wgsl"
#include "sh.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> splats: array<Splat2D>;
@group(0) @binding(3) var<storage, read_write> radii: array<i32>;
@group(0) @binding(4) var<storage, read_write> rects: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> depth_keys: array<u32>;
@group(0) @binding(6) var<storage, read_write> ids: array<u32>;
@group(0) @binding(7) var<storage, read_write> counters: array<u32>;

fn quat_to_rotmat(q: vec4<f32>) -> mat3x3<f32> {
    // q = (w, x, y, z), already normalised. Returns R (columns as WGSL mat3x3 columns).
    let w = q.x;
    let x = q.y;
    let y = q.z;
    let z = q.w;
    return mat3x3<f32>(
        vec3<f32>(1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y)),
        vec3<f32>(2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x)),
        vec3<f32>(2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y)));
}

fn sh_coeff(base: u32, c: u32) -> vec3<f32> {
    let o = base + 3u * c;
    return vec3<f32>(params[o], params[o + 1u], params[o + 2u]);
}

@compute @workgroup_size(256)
fn project(@builtin(local_invocation_index) lid: u32,
           @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = rp.model.x;
    let i = linear_workgroup(wid, nwg) * BLOCK_SIZE + lid;
    if (i == 0u) {
        counters[4] = n;
    }
    if (i >= n) {
        return;
    }
    ids[i] = i;
    let mean = vec3<f32>(params[3u * i], params[3u * i + 1u], params[3u * i + 2u]);
    let t = vec3<f32>(dot(rp.w2c0.xyz, mean) + rp.w2c0.w,
                      dot(rp.w2c1.xyz, mean) + rp.w2c1.w,
                      dot(rp.w2c2.xyz, mean) + rp.w2c2.w);
    var s: Splat2D;
    s.depth = t.z;
    let ol = params[rp.offs.z + i];
    s.opacity = 1.0 / (1.0 + exp(-ol));
    s.xy = vec2<f32>(0.0);
    s.conic = vec3<f32>(0.0);
    s.radius = 0.0;

    // View-dependent colour (computed for every splat so that the backward pass can rely on it).
    let dir = normalize(mean - rp.cam_pos.xyz);
    let k = rp.model.y;
    let deg = min(min(rp.model.z, 3u), u32(sqrt(f32(k))) - 1u);
    let base = rp.offs.w + i * k * 3u;
    var basis: array<f32, 16>;
    sh_basis(dir, &basis);
    // Constant indices (unrolled by degree): dynamic indexing of a private array is very slow on
    // CPU drivers such as lavapipe.
    var raw = vec3<f32>(0.5) + basis[0] * sh_coeff(base, 0u);
    if (deg >= 1u) {
        raw = raw + basis[1] * sh_coeff(base, 1u) + basis[2] * sh_coeff(base, 2u)
                  + basis[3] * sh_coeff(base, 3u);
    }
    if (deg >= 2u) {
        raw = raw + basis[4] * sh_coeff(base, 4u) + basis[5] * sh_coeff(base, 5u)
                  + basis[6] * sh_coeff(base, 6u) + basis[7] * sh_coeff(base, 7u)
                  + basis[8] * sh_coeff(base, 8u);
    }
    if (deg >= 3u) {
        raw = raw + basis[9] * sh_coeff(base, 9u) + basis[10] * sh_coeff(base, 10u)
                  + basis[11] * sh_coeff(base, 11u) + basis[12] * sh_coeff(base, 12u)
                  + basis[13] * sh_coeff(base, 13u) + basis[14] * sh_coeff(base, 14u)
                  + basis[15] * sh_coeff(base, 15u);
    }
    s.color = max(raw, vec3<f32>(0.0));
    s.flags = select(0u, 1u, raw.x < 0.0) | select(0u, 2u, raw.y < 0.0) | select(0u, 4u, raw.z < 0.0);

    var rect = vec4<u32>(0u);
    var radius = 0.0;
    if (t.z >= NEAR_PLANE) {
        let ls = vec3<f32>(params[rp.offs.x + 3u * i], params[rp.offs.x + 3u * i + 1u],
                           params[rp.offs.x + 3u * i + 2u]);
        let q4 = vec4<f32>(params[rp.offs.y + 4u * i], params[rp.offs.y + 4u * i + 1u],
                           params[rp.offs.y + 4u * i + 2u], params[rp.offs.y + 4u * i + 3u]);
        let rot = quat_to_rotmat(normalize(q4));
        let sc = exp(ls);
        // M = R S ; Sigma = M M^T
        let m = mat3x3<f32>(rot[0] * sc.x, rot[1] * sc.y, rot[2] * sc.z);
        let fx = rp.focal.x;
        let fy = rp.focal.y;
        let tz = t.z;
        let tx = clamp(t.x / tz, -rp.clip.x, rp.clip.x) * tz;
        let ty = clamp(t.y / tz, -rp.clip.y, rp.clip.y) * tz;
        // Rows of J W (J = [[fx/z, 0, -fx x/z^2], [0, fy/z, -fy y/z^2]], W = camera rotation).
        let j0 = vec3<f32>(fx / tz, 0.0, -fx * tx / (tz * tz));
        let j1 = vec3<f32>(0.0, fy / tz, -fy * ty / (tz * tz));
        let w_r0 = rp.w2c0.xyz;
        let w_r1 = rp.w2c1.xyz;
        let w_r2 = rp.w2c2.xyz;
        let t0 = j0.x * w_r0 + j0.y * w_r1 + j0.z * w_r2;
        let t1 = j1.x * w_r0 + j1.y * w_r1 + j1.z * w_r2;
        // A = (J W) M, cov2d = A A^T + 0.3 I
        let a0 = t0 * m;   // row vector times matrix: (t0 . m[0], t0 . m[1], t0 . m[2])
        let a1 = t1 * m;
        let ca = dot(a0, a0) + COV2D_DILATION;
        let cb = dot(a0, a1);
        let cc = dot(a1, a1) + COV2D_DILATION;
        let det = ca * cc - cb * cb;
        if (det > 0.0) {
            let inv_det = 1.0 / det;
            let mid = 0.5 * (ca + cc);
            let lambda = mid + sqrt(max(mid * mid - det, 0.0));
            radius = ceil(3.0 * sqrt(lambda));
            let u = fx * t.x / tz + rp.focal.z;
            let v = fy * t.y / tz + rp.focal.w;
            let tiles = vec2<f32>(f32(rp.img.z), f32(rp.img.w));
            let lo = clamp(floor((vec2<f32>(u, v) - radius) / f32(TILE_SIZE)), vec2<f32>(0.0), tiles);
            let hi = clamp(ceil((vec2<f32>(u, v) + radius) / f32(TILE_SIZE)), vec2<f32>(0.0), tiles);
            rect = vec4<u32>(vec2<u32>(lo), vec2<u32>(hi));
            if (rect.z > rect.x && rect.w > rect.y) {
                s.xy = vec2<f32>(u, v);
                s.conic = vec3<f32>(cc * inv_det, -cb * inv_det, ca * inv_det);
            } else {
                rect = vec4<u32>(0u);
                radius = 0.0;
            }
        }
    }
    s.radius = radius;
    splats[i] = s;
    radii[i] = i32(radius);
    rects[i] = rect;
    depth_keys[i] = bitcast<u32>(t.z);
}
