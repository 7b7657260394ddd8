// Three rows of vec4 sums over a 256-thread workgroup, in a fixed order (the same bits every run):
// the per-view kernels' reductions (appearance.wgsl, pose.wgsl). The including module defines
// `partial_row(i: u32, r: u32) -> vec4<f32>`, row r of its i-th partial sum, for sum_partials.
// Every thread of the workgroup calls these functions (they hold barriers).

const WG: u32 = 256u;

var<workgroup> wg_sums: array<vec4<f32>, 768>;   // 3 × WG (12 KiB): rows of the threads' sums

// Sums the rows of WG thread values (s0, s1, s2) into wg_sums[0], [WG], [2 WG].
fn reduce_rows(lid: u32, s0: vec4<f32>, s1: vec4<f32>, s2: vec4<f32>) {
    wg_sums[lid] = s0;
    wg_sums[WG + lid] = s1;
    wg_sums[2u * WG + lid] = s2;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            for (var r = 0u; r < 3u; r = r + 1u) {
                wg_sums[r * WG + lid] = wg_sums[r * WG + lid] + wg_sums[r * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
}

// Sums n partials (each three rows): thread lid takes every WG-th from lid, then the tree.
fn sum_partials(lid: u32, n: u32) {
    var s0 = vec4<f32>(0.0);
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    for (var base = 0u; base < n; base = base + WG) {   // a uniform bound: n from a uniform
        let p = base + lid;
        if (p < n) {
            s0 = s0 + partial_row(p, 0u);
            s1 = s1 + partial_row(p, 1u);
            s2 = s2 + partial_row(p, 2u);
        }
    }
    reduce_rows(lid, s0, s1, s2);
}
