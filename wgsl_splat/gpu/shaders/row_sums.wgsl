// Three rows of vec4 sums of many partials over a 256-thread workgroup, in a fixed order (the same
// bits every run): the per-view kernels' reductions (appearance.wgsl, pose.wgsl). The including
// module defines `partial_row(i: u32, r: u32) -> vec4<f32>`, row r of its i-th partial sum.
// Every thread of the workgroup calls these functions (they hold barriers).

#include "row_tree.wgsl"

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
