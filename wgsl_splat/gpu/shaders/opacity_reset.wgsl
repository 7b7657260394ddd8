// 3DGS reset_opacity on the device (NumPy twin: reference/rows.py reset_opacity): every opacity
// capped at the reset value, and the opacity moments of Adam zeroed. In the antialiased mode the
// cap applies to the opacity as rendered, σ·c3 with the 3D filter's compensation
// c3 = Π s / sqrt(s² + f²) (Mip-Splatting's reset_opacity): σ ← min(σ·c3, value) / c3.

#include "render_config.wgsl"

struct ResetParams {
    sizes: vec4<u32>,     // N, offset of the opacity logits, x workgroups per row, offset of the log-scales
    value: vec4<f32>,     // the cap as a logit, the cap, 0, 0
}

@group(0) @binding(0) var<uniform> rp: ResetParams;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> adam_m: array<f32>;
@group(0) @binding(3) var<storage, read_write> adam_v: array<f32>;
@group(0) @binding(4) var<storage, read> filter3d: array<f32>;

@compute @workgroup_size(256)
fn reset_opacity(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = (wid.x + wid.y * rp.sizes.z) * 256u + lid;
    if (i >= rp.sizes.x) {
        return;
    }
    let o = rp.sizes.y + i;
    if (ANTIALIASED) {
        let ls = rp.sizes.w + 3u * i;
        let s = exp(vec3<f32>(params[ls], params[ls + 1u], params[ls + 2u]));
        let f2 = filter3d[i] * filter3d[i];
        let c = s / sqrt(s * s + vec3<f32>(f2));
        let comp3 = c.x * c.y * c.z;
        let sigma = min(comp3 / (1.0 + exp(-params[o])), rp.value.y) / comp3;
        params[o] = log(sigma / (1.0 - sigma));
    } else {
        params[o] = min(params[o], rp.value.x);
    }
    adam_m[o] = 0.0;
    adam_v[o] = 0.0;
}
