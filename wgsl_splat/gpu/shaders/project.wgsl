// docs/design.md §3 stage 1: project every Gaussian (cull, EWA 2D covariance, conic, radius, tile rectangle) and
// evaluate its view-dependent colour from SH. One thread per Gaussian. In the antialiased mode the
// splat's opacity carries both Mip-Splatting compensations (gaussian.wgsl).
// Also seeds the depth sort: depth_keys[i] = bitcast<u32>(depth), ids[i] = i, and counters[4] = N.
// Runs once per page of the state (gpu/pages.py): i is the row within the page, whose parameters
// are `params` and whose windows of the per-row buffers start at its first row rp.grid.x.

#include "common.wgsl"
#include "sh.wgsl"
#include "gaussian.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> splats: array<Splat2D>;
@group(0) @binding(4) var<storage, read_write> rects: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> depth_keys: array<u32>;
@group(0) @binding(6) var<storage, read_write> ids: array<u32>;
@group(0) @binding(7) var<storage, read_write> counters: array<u32>;
@group(0) @binding(8) var<storage, read> filter3d: array<f32>;

@compute @workgroup_size(BLOCK_SIZE)
fn project(@builtin(local_invocation_index) lid: u32,
           @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = rp.model.x;
    let i = linear_workgroup(wid, nwg) * BLOCK_SIZE + lid;
    if (i == 0u) {
        counters[4] = rp.grid.y;
    }
    if (i >= n) {
        return;
    }
    ids[i] = rp.grid.x + i;
    let mean = gaussian_mean(i);
    let t = camera_space(mean);
    var s: Splat2D;
    s.depth = t.z;
    let ol = params[rp.offs.z + i];
    s.opacity = 1.0 / (1.0 + exp(-ol));
    s.xy = vec2<f32>(0.0);
    s.conic = vec3<f32>(0.0);
    s.radius = 0.0;

    // View-dependent colour (computed for every splat so that the backward pass can rely on it).
    let dir = normalize(mean - rp.cam_pos.xyz);
    let k = SH_COEFFS;
    let deg = active_degree();
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
    // Bit c: channel c carries no gradient (raw <= 0 or NaN), the reference's `colors_raw > 0` mask.
    s.flags = select(0u, 1u, !(raw.x > 0.0)) | select(0u, 2u, !(raw.y > 0.0))
            | select(0u, 4u, !(raw.z > 0.0));

    var rect = vec4<u32>(0u);
    var radius = 0.0;
    // Every float compare below sees finite values only (gaussian.wgsl, nonfinite): a degenerate
    // Gaussian is culled here, and a garbage rectangle can never reach emission.
    if (gaussian_valid(i, mean) && !nonfinite(t.z) && t.z >= NEAR_PLANE) {
        let e = ewa_terms(i, t);
        let ca = e.cov.x;
        let cb = e.cov.y;
        let cc = e.cov.z;
        let det = ca * cc - cb * cb;
        if (!any_nonfinite3(e.cov) && !nonfinite(det) && det > 0.0) {
            if (ANTIALIASED) {
                s.opacity = s.opacity * filter3d_compensation(e) * filter2d_compensation(e, det);
            }
            let inv_det = 1.0 / det;
            let mid = 0.5 * (ca + cc);
            let lambda = mid + sqrt(max(mid * mid - det, 0.0));
            radius = ceil(3.0 * sqrt(lambda));
            let uv = rp.focal.xy * e.u + rp.focal.zw;
            // Tile rectangle: bounding box of where alpha can reach 1/255 (reference tile_extent).
            let lg = max(log(s.opacity * 255.0), 0.0);
            let ext = min(ceil(sqrt(2.0 * lg * vec2<f32>(ca, cc))), vec2<f32>(radius));
            let tiles = vec2<f32>(f32(rp.img.z), f32(rp.img.w));
            let lo_f = floor((uv - ext) / f32(TILE_SIZE));
            let hi_f = ceil((uv + ext) / f32(TILE_SIZE));
            let finite = !nonfinite(radius) && !nonfinite(s.opacity) && !nonfinite(lo_f.x)
                         && !nonfinite(lo_f.y) && !nonfinite(hi_f.x) && !nonfinite(hi_f.y);
            if (finite) {
                // finite, so the float clamp is defined; the integer min keeps the rectangle
                // inside the grid whatever the conversion does at the edges
                let grid = vec4<u32>(rp.img.z, rp.img.w, rp.img.z, rp.img.w);
                rect = min(vec4<u32>(vec2<u32>(clamp(lo_f, vec2<f32>(0.0), tiles)),
                                     vec2<u32>(clamp(hi_f, vec2<f32>(0.0), tiles))), grid);
            }
            if (finite && s.opacity * 255.0 > 1.0 && rect.z > rect.x && rect.w > rect.y) {
                s.xy = uv;
                s.conic = vec3<f32>(cc * inv_det, -cb * inv_det, ca * inv_det);
            } else {
                rect = vec4<u32>(0u);
                radius = 0.0;
            }
        }
    }
    s.radius = radius;
    splats[i] = s;
    rects[i] = rect;
    depth_keys[i] = bitcast<u32>(t.z);
}
