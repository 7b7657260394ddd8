// Row operations on the training state (wgsl_splat/training/state.py; NumPy twin: reference/rows.py
// apply_rows, reset_opacity). A row table entry is (source row, kind | sample << 8):
//   KEEP 0: the row as it is;  NEW 1: parameters copied, moments and statistics zero;
//   SPLIT 2: NEW with mean + R·(s ⊙ z) and log-scales − log(div);  RELOCATE 3: NEW with the
//   opacity logit and log-scale shift of relocated[source].
// apply_params rebuilds the parameter buffer, apply_plain any buffer whose new rows are zero
// (Adam moments, statistics): one thread per output row, writing into a new buffer that becomes
// the array (gpu/state.py), so source and destination never alias. The state is paged
// (gpu/pages.py): a dispatch writes the rows of one destination page whose sources lie in one
// source page (rows [src_base, src_base + src_rows) of the table's numbering), so the host runs
// one per pair of pages; new rows' zeros are written by the pass of the first source page.

#include "random.wgsl"
#include "row_constants.wgsl"

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)
const MAX_SEGMENTS: u32 = 6u;   // arrays per buffer apply_plain rebuilds (the statistics: one each)

struct RowParams {
    n_out: u32,             // rows written
    k: u32,                 // SH coefficients per row
    x_groups: u32,          // x workgroups per grid row
    segments: u32,          // apply_plain: entries of seg
    src_offs: vec4<u32>,    // params: source offsets of log-scales, quats, opacity logits, SH
    dst_offs: vec4<u32>,    // the same in the destination
    log_split_div: f32,     // log(split scale divisor)
    key: u32,               // split random stream
    src_base: u32,          // the source page's first row
    src_rows: u32,          // and its rows
    dst_base: u32,          // the destination page's first row
    zero_new: u32,          // apply_plain: 1 in the pass that writes the new rows' zeros
    // apply_plain: (source offset, destination offset, width, 0) of each array in the buffer
    seg: array<vec4<u32>, MAX_SEGMENTS>,
}

@group(0) @binding(0) var<uniform> rp: RowParams;   // dynamic
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> relocated: array<vec2<f32>>;

fn row_index(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * rp.x_groups) * WG + lid;
}

fn copy_span(from_: u32, to: u32, count: u32) {
    for (var c = 0u; c < count; c = c + 1u) {
        dst[to + c] = src[from_ + c];
    }
}

fn quat_rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    // R(q) v for a normalised w,x,y,z quaternion (the columns of gaussian.wgsl's quat_to_rotmat)
    let w = q.x;
    let x = q.y;
    let y = q.z;
    let z = q.w;
    return vec3<f32>(
        (1.0 - 2.0 * (y * y + z * z)) * v.x + 2.0 * (x * y - w * z) * v.y + 2.0 * (x * z + w * y) * v.z,
        2.0 * (x * y + w * z) * v.x + (1.0 - 2.0 * (x * x + z * z)) * v.y + 2.0 * (y * z - w * x) * v.z,
        2.0 * (x * z - w * y) * v.x + 2.0 * (y * z + w * x) * v.y + (1.0 - 2.0 * (x * x + y * y)) * v.z);
}

@compute @workgroup_size(WG)
fn apply_params(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = row_index(lid, wid);
    if (r >= rp.n_out) {
        return;
    }
    let e = table[rp.dst_base + r];
    if (e.x < rp.src_base || e.x - rp.src_base >= rp.src_rows) {
        return;                 // its source is in another page: another pass
    }
    let s = e.x - rp.src_base;
    let kind = e.y & 0xffu;
    let k3 = 3u * rp.k;
    let so = rp.src_offs;
    let d = rp.dst_offs;
    var mean = vec3<f32>(src[3u * s], src[3u * s + 1u], src[3u * s + 2u]);
    var ls = vec3<f32>(src[so.x + 3u * s], src[so.x + 3u * s + 1u], src[so.x + 3u * s + 2u]);
    var logit = src[so.z + s];
    if (kind == SPLIT) {
        let q = vec4<f32>(src[so.y + 4u * s], src[so.y + 4u * s + 1u], src[so.y + 4u * s + 2u],
                          src[so.y + 4u * s + 3u]);
        let z = random_normal3(rp.key, e.x * SPLIT_DRAWS + (e.y >> 8u));
        mean = mean + quat_rotate(q / length(q), exp(ls) * z);
        ls = ls - vec3<f32>(rp.log_split_div);
    } else if (kind == RELOCATE) {
        let rel = relocated[e.x];
        logit = rel.x;
        ls = ls + vec3<f32>(rel.y);
    }
    dst[3u * r] = mean.x;
    dst[3u * r + 1u] = mean.y;
    dst[3u * r + 2u] = mean.z;
    dst[d.x + 3u * r] = ls.x;
    dst[d.x + 3u * r + 1u] = ls.y;
    dst[d.x + 3u * r + 2u] = ls.z;
    copy_span(so.y + 4u * s, d.y + 4u * r, 4u);
    dst[d.z + r] = logit;
    copy_span(so.w + k3 * s, d.w + k3 * r, k3);
}

@compute @workgroup_size(WG)
fn apply_plain(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = row_index(lid, wid);
    if (r >= rp.n_out) {
        return;
    }
    let e = table[rp.dst_base + r];
    let keep = (e.y & 0xffu) == KEEP;
    let in_page = e.x >= rp.src_base && e.x - rp.src_base < rp.src_rows;
    if ((keep && !in_page) || (!keep && rp.zero_new == 0u)) {
        return;                 // another pass writes this row
    }
    let s = e.x - rp.src_base;
    for (var g = 0u; g < rp.segments; g = g + 1u) {
        let seg = rp.seg[g];
        let w = seg.z;
        for (var c = 0u; c < w; c = c + 1u) {
            var v = 0.0;
            if (keep) {
                v = src[seg.x + w * s + c];
            }
            dst[seg.y + w * r + c] = v;
        }
    }
}
