// --appearance (docs/captures.md): the view's affine colour transform C' = A·C + b between the
// rasteriser and the loss, its backward pass and its Adam update. Math: training/appearance.py.
//
//   app_apply    one thread per image row: image_app = A·image + b
//   app_backward one thread per image row: grad_image = Aᵀ·grad_app; the row's sums of
//                dL/dA = grad_app·Cᵀ and dL/db = grad_app -> partials[row·12 ..]
//   app_update   one thread: the partials summed in row order (deterministic), then Adam on the
//                view's 12 floats in app_state (params, m, v: 36 floats per view)
//
// No workgroup memory and no barriers (cheap on CPU adapters too); one thread per row keeps the
// dispatch 1D for any image height below 64·65535.

struct AppParams {
    dims: vec4<u32>,   // width, height, view, 0
    adam: vec4<f32>,   // lr / (1 - β1^t), 1 / sqrt(1 - β2^t), β1, β2
    misc: vec4<f32>,   // ε, 0, 0, 0
}

@group(0) @binding(0) var<uniform> ap: AppParams;
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read_write> image_app: array<f32>;
@group(0) @binding(3) var<storage, read> grad_app: array<f32>;
@group(0) @binding(4) var<storage, read_write> grad_image: array<f32>;
@group(0) @binding(5) var<storage, read_write> app_state: array<f32>;
@group(0) @binding(6) var<storage, read_write> app_partials: array<f32>;

#include "adam_update.wgsl"

const WG: u32 = 64u;
const FLOATS: u32 = 12u;    // a 3x4 matrix, row-major: A row c = [c·4 .. c·4+2], b_c = [c·4+3]

fn param(k: u32) -> f32 {
    return app_state[ap.dims.z * 3u * FLOATS + k];
}

@compute @workgroup_size(WG)
fn app_apply(@builtin(global_invocation_id) gid: vec3<u32>) {
    let y = gid.x;
    if (y >= ap.dims.y) {
        return;
    }
    let a0 = vec4<f32>(param(0u), param(1u), param(2u), param(3u));
    let a1 = vec4<f32>(param(4u), param(5u), param(6u), param(7u));
    let a2 = vec4<f32>(param(8u), param(9u), param(10u), param(11u));
    for (var x = 0u; x < ap.dims.x; x = x + 1u) {
        let o = (y * ap.dims.x + x) * 3u;
        let c = vec4<f32>(image[o], image[o + 1u], image[o + 2u], 1.0);
        image_app[o] = dot(a0, c);
        image_app[o + 1u] = dot(a1, c);
        image_app[o + 2u] = dot(a2, c);
    }
}

@compute @workgroup_size(WG)
fn app_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let y = gid.x;
    if (y >= ap.dims.y) {
        return;
    }
    let a0 = vec3<f32>(param(0u), param(1u), param(2u));
    let a1 = vec3<f32>(param(4u), param(5u), param(6u));
    let a2 = vec3<f32>(param(8u), param(9u), param(10u));
    var s0 = vec4<f32>(0.0);   // Σ g_c·(C, 1) for c = 0, 1, 2
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    for (var x = 0u; x < ap.dims.x; x = x + 1u) {
        let o = (y * ap.dims.x + x) * 3u;
        let g = vec3<f32>(grad_app[o], grad_app[o + 1u], grad_app[o + 2u]);
        let c = vec4<f32>(image[o], image[o + 1u], image[o + 2u], 1.0);
        let gi = g.x * a0 + g.y * a1 + g.z * a2;   // Aᵀ·g
        grad_image[o] = gi.x;
        grad_image[o + 1u] = gi.y;
        grad_image[o + 2u] = gi.z;
        s0 = s0 + g.x * c;
        s1 = s1 + g.y * c;
        s2 = s2 + g.z * c;
    }
    let p = y * FLOATS;
    for (var k = 0u; k < 4u; k = k + 1u) {
        app_partials[p + k] = s0[k];
        app_partials[p + 4u + k] = s1[k];
        app_partials[p + 8u + k] = s2[k];
    }
}

@compute @workgroup_size(1)
fn app_update() {
    let base = ap.dims.z * 3u * FLOATS;
    let b1 = ap.adam.z;
    let b2 = ap.adam.w;
    for (var k = 0u; k < FLOATS; k = k + 1u) {
        var g = 0.0;
        for (var y = 0u; y < ap.dims.y; y = y + 1u) {
            g = g + app_partials[y * FLOATS + k];
        }
        let mv = adam_moments(g, app_state[base + FLOATS + k], app_state[base + 2u * FLOATS + k],
                              1.0 - b1, b2, 1.0 - b2);
        app_state[base + FLOATS + k] = mv.m;
        app_state[base + 2u * FLOATS + k] = mv.v;
        app_state[base + k] = adam_view_step(app_state[base + k], mv, ap.adam.x, ap.adam.y,
                                             ap.misc.x);
    }
}
