// 3DGS reset_opacity on the device (NumPy twin: reference/rows.py reset_opacity): every opacity
// capped at the reset value, and the opacity moments of Adam zeroed. In the antialiased mode the
// cap applies to the opacity as rendered, σ·c3 with the 3D filter's compensation
// c3 = Π s / sqrt(s² + f²) (Mip-Splatting's reset_opacity): σ ← min(σ·c3, value) / c3.

#include "render_config.wgsl"

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)

struct ResetParams {
    n: u32,               // rows
    opacity: u32,         // offset of the opacity logits in params
    x_groups: u32,        // x workgroups per grid row
    log_scales: u32,      // offset of the log-scales
    cap_logit: f32,       // the cap as a logit
    cap: f32,             // the cap
}

@group(0) @binding(0) var<uniform> rp: ResetParams;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> adam_m: array<f32>;
@group(0) @binding(3) var<storage, read_write> adam_v: array<f32>;
@group(0) @binding(4) var<storage, read> filter3d: array<f32>;

@compute @workgroup_size(WG)
fn reset_opacity(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = (wid.x + wid.y * rp.x_groups) * WG + lid;
    if (i >= rp.n) {
        return;
    }
    let o = rp.opacity + i;
    if (ANTIALIASED) {
        let ls = rp.log_scales + 3u * i;
        let s = exp(vec3<f32>(params[ls], params[ls + 1u], params[ls + 2u]));
        let f2 = filter3d[i] * filter3d[i];
        let c = s / sqrt(s * s + vec3<f32>(f2));
        let comp3 = c.x * c.y * c.z;
        let sigma = min(comp3 / (1.0 + exp(-params[o])), rp.cap) / comp3;
        params[o] = log(sigma / (1.0 - sigma));
    } else {
        params[o] = min(params[o], rp.cap_logit);
    }
    adam_m[o] = 0.0;
    adam_v[o] = 0.0;
}
