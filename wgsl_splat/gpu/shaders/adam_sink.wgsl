// project_backward.wgsl's sink of the parameter gradients when a step is one view: the Adam update
// of the parameter in place, the moment its gradient is known (no gradient buffer, no Adam pass).
// The update is adam.wgsl's (adam_update.wgsl: the reference's adam_step in float32); the
// learning-rate group of flat offset o follows from the layout's offsets (means, log-scales,
// quaternions, opacity logits, SH: the DC rate for the first 3 floats of every 3K, the rest rate
// for the others).

#include "adam_update.wgsl"

struct FusedAdam {
    hyper: vec4<f32>,     // 1 - β1, β2, 1 - β2, eps
    hyper2: vec4<f32>,    // sqrt(1 - β2^t), gradient scale, 0, 0
    lr0: vec4<f32>,       // step sizes lr / (1 - β1^t): means, log-scales, quaternions, opacity
    lr1: vec4<f32>,       // SH DC, SH rest, 0, 0
}

@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(4) var<storage, read_write> adam_m: array<f32>;
@group(0) @binding(9) var<storage, read_write> adam_v: array<f32>;
@group(0) @binding(10) var<uniform> ap: FusedAdam;

fn step_size(o: u32) -> f32 {
    let sh = o - rp.offs.w;
    var s = select(ap.lr1.y, ap.lr1.x, sh % (3u * SH_COEFFS) < 3u);
    s = select(s, ap.lr0.w, o < rp.offs.w);
    s = select(s, ap.lr0.z, o < rp.offs.z);
    s = select(s, ap.lr0.y, o < rp.offs.y);
    return select(s, ap.lr0.x, o < rp.offs.x);
}

fn sink(o: u32, v: f32) {
    let g = v * ap.hyper2.y;
    let mv = adam_moments(g, adam_m[o], adam_v[o], ap.hyper.x, ap.hyper.y, ap.hyper.z);
    params[o] = adam_param_step(params[o], mv, step_size(o), ap.hyper2.x, ap.hyper.w);
    adam_m[o] = mv.m;
    adam_v[o] = mv.v;
}
