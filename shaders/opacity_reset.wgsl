// 3DGS reset_opacity on the device (NumPy twin: reference/rows.py reset_opacity): every opacity
// logit capped at logit(value), and the opacity moments of Adam zeroed.

struct ResetParams {
    sizes: vec4<u32>,     // N, offset of the opacity logits in params/moments, x workgroups per row, 0
    value: vec4<f32>,     // the logit cap, 0, 0, 0
}

@group(0) @binding(0) var<uniform> rp: ResetParams;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> adam_m: array<f32>;
@group(0) @binding(3) var<storage, read_write> adam_v: array<f32>;

@compute @workgroup_size(256)
fn reset_opacity(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = (wid.x + wid.y * rp.sizes.z) * 256u + lid;
    if (i >= rp.sizes.x) {
        return;
    }
    let o = rp.sizes.y + i;
    params[o] = min(params[o], rp.value.x);
    adam_m[o] = 0.0;
    adam_v[o] = 0.0;
}
