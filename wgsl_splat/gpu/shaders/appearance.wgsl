// --appearance (docs/captures.md): the view's affine colour transform C' = A·C + b between the
// rasteriser and the loss, its backward pass and its Adam update. Math: training/appearance.py.
// Two layouts (Layout.per_view_tiles), the same partials (3 vec4 each: Σ g_c·(C, 1), c = 0..2):
//
// GPUs, a thread per pixel:
//   app_apply         16×16 tiles: image_app = A·image + b
//   app_backward      16×16 tiles: grad_image = Aᵀ·grad_app; the tile's sums of dL/dA =
//                     grad_app·Cᵀ and dL/db = grad_app by a tree in workgroup memory ->
//                     app_partials[3·tile ..] (tile = row-major index of the workgroup)
//   app_update        one workgroup: each thread sums the partials p ≡ lid (mod WG) in order, a
//                     tree sums the threads, then 12 threads apply Adam to the view's 12 floats
// CPU adapters (lavapipe), few long threads and no barriers:
//   app_apply_rows    a thread per image row
//   app_backward_rows a thread per image row -> app_partials[3·row ..]
//   app_update_serial one thread: the partials summed in order, then Adam
//
// app_state: params, m, v (36 floats per view). Every sum has a fixed order (no float atomics):
// the same bits run to run. A thread per row leaves a 480×270 view 270 threads, too few for a GPU;
// 2-D tiles keep its dispatch within 65 535 workgroups a side below 1 M pixels a side.

struct AppParams {
    dims: vec4<u32>,   // width, height, view, partials (tiles or rows)
    adam: vec4<f32>,   // lr / (1 - β1^t), 1 / sqrt(1 - β2^t), β1, β2
    misc: vec4<f32>,   // ε, centring strength, views (all of app_state's), 0
}

@group(0) @binding(0) var<uniform> ap: AppParams;
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read_write> image_app: array<f32>;
@group(0) @binding(3) var<storage, read> grad_app: array<f32>;
@group(0) @binding(4) var<storage, read_write> grad_image: array<f32>;
@group(0) @binding(5) var<storage, read_write> app_state: array<f32>;
// per tile: Σ g_c·(C, 1) for c = 0, 1, 2 (row c of [dL/dA | dL/db])
@group(0) @binding(6) var<storage, read_write> app_partials: array<vec4<f32>>;

#include "adam_update.wgsl"
#include "row_sums.wgsl"

const TILE: u32 = 16u;      // TILE² = WG (row_sums.wgsl): a tile's threads are one reduction's
const ROWS_WG: u32 = 64u;
const FLOATS: u32 = 12u;    // a 3x4 matrix, row-major: A row c = [c·4 .. c·4+2], b_c = [c·4+3]

fn param(k: u32) -> f32 {
    return app_state[ap.dims.z * 3u * FLOATS + k];
}

fn tiles() -> vec2<u32> {
    return (ap.dims.xy + vec2<u32>(TILE - 1u)) / TILE;
}

fn partial_row(i: u32, r: u32) -> vec4<f32> {
    return app_partials[3u * i + r];
}

@compute @workgroup_size(TILE, TILE)
fn app_apply(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= ap.dims.x || gid.y >= ap.dims.y) {
        return;
    }
    let a0 = vec4<f32>(param(0u), param(1u), param(2u), param(3u));
    let a1 = vec4<f32>(param(4u), param(5u), param(6u), param(7u));
    let a2 = vec4<f32>(param(8u), param(9u), param(10u), param(11u));
    let o = (gid.y * ap.dims.x + gid.x) * 3u;
    let c = vec4<f32>(image[o], image[o + 1u], image[o + 2u], 1.0);
    image_app[o] = dot(a0, c);
    image_app[o + 1u] = dot(a1, c);
    image_app[o + 2u] = dot(a2, c);
}

// One pixel (at float offset o) of the backward pass: dL/dimage = Aᵀ·g written, and its terms of
// dL/dA, g_c·(C, 1) per output channel c, returned for the sums.
fn pixel_backward(o: u32) -> array<vec4<f32>, 3> {
    let a0 = vec3<f32>(param(0u), param(1u), param(2u));
    let a1 = vec3<f32>(param(4u), param(5u), param(6u));
    let a2 = vec3<f32>(param(8u), param(9u), param(10u));
    let g = vec3<f32>(grad_app[o], grad_app[o + 1u], grad_app[o + 2u]);
    let c = vec4<f32>(image[o], image[o + 1u], image[o + 2u], 1.0);
    let gi = g.x * a0 + g.y * a1 + g.z * a2;   // Aᵀ·g
    grad_image[o] = gi.x;
    grad_image[o + 1u] = gi.y;
    grad_image[o + 2u] = gi.z;
    return array<vec4<f32>, 3>(g.x * c, g.y * c, g.z * c);
}

@compute @workgroup_size(TILE, TILE)
fn app_backward(@builtin(global_invocation_id) gid: vec3<u32>,
                @builtin(local_invocation_index) lid: u32,
                @builtin(workgroup_id) wid: vec3<u32>) {
    var s0 = vec4<f32>(0.0);   // this pixel's g_c·(C, 1); zero outside the image
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    if (gid.x < ap.dims.x && gid.y < ap.dims.y) {   // no return: the tree below has barriers
        let s = pixel_backward((gid.y * ap.dims.x + gid.x) * 3u);
        s0 = s[0];
        s1 = s[1];
        s2 = s[2];
    }
    reduce_rows(lid, s0, s1, s2);
    if (lid < 3u) {
        app_partials[3u * (wid.y * tiles().x + wid.x) + lid] = wg_sums[lid * WG];
    }
}

@compute @workgroup_size(WG)
fn app_update(@builtin(local_invocation_index) lid: u32) {
    sum_partials(lid, ap.dims.w);
    // Adam on 12 floats: one thread each, the rest idle (the work is the sum above).
    if (lid < FLOATS) {
        adam_step(lid, wg_sums[(lid / 4u) * WG][lid % 4u]);
    }
}

// optim.appearance_centring (contract/appearance.py centring_grad): strength · (the mean over
// every view of element k − the identity's). Read before this view's element k is written, by the
// thread that writes it: no other thread touches element k.
fn centring(k: u32) -> f32 {
    if (ap.misc.y == 0.0) {
        return 0.0;
    }
    let views = u32(ap.misc.z);
    var sum = 0.0;
    for (var v = 0u; v < views; v = v + 1u) {
        sum = sum + app_state[v * 3u * FLOATS + k];
    }
    let ident = select(0.0, 1.0, k % 4u == k / 4u);   // A's diagonal: row c, column c
    return ap.misc.y * (sum / f32(views) - ident);
}

fn adam_step(k: u32, g_photo: f32) {
    let g = g_photo + centring(k);
    let base = ap.dims.z * 3u * FLOATS;
    let b1 = ap.adam.z;
    let b2 = ap.adam.w;
    let mv = adam_moments(g, app_state[base + FLOATS + k], app_state[base + 2u * FLOATS + k],
                          1.0 - b1, b2, 1.0 - b2);
    app_state[base + FLOATS + k] = mv.m;
    app_state[base + 2u * FLOATS + k] = mv.v;
    app_state[base + k] = adam_view_step(app_state[base + k], mv, ap.adam.x, ap.adam.y, ap.misc.x);
}

@compute @workgroup_size(ROWS_WG)
fn app_apply_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
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

@compute @workgroup_size(ROWS_WG)
fn app_backward_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let y = gid.x;
    if (y >= ap.dims.y) {
        return;
    }
    var s0 = vec4<f32>(0.0);
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    for (var x = 0u; x < ap.dims.x; x = x + 1u) {
        let s = pixel_backward((y * ap.dims.x + x) * 3u);
        s0 = s0 + s[0];
        s1 = s1 + s[1];
        s2 = s2 + s[2];
    }
    app_partials[3u * y] = s0;
    app_partials[3u * y + 1u] = s1;
    app_partials[3u * y + 2u] = s2;
}

@compute @workgroup_size(1)
fn app_update_serial() {
    var s = array<vec4<f32>, 3>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var p = 0u; p < ap.dims.w; p = p + 1u) {
        for (var r = 0u; r < 3u; r = r + 1u) {
            s[r] = s[r] + app_partials[3u * p + r];
        }
    }
    for (var k = 0u; k < FLOATS; k = k + 1u) {
        adam_step(k, s[k / 4u][k % 4u]);
    }
}
