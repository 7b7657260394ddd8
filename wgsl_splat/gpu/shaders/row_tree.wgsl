// Three rows of vec4 sums over a WG-thread workgroup by a fixed tree (the same bits every run):
// row_sums.wgsl's reductions (appearance.wgsl, pose.wgsl) and --pose-opt's per-workgroup sums in
// project_backward.wgsl (gpu/backward.py's generated pose_grad.wgsl). Every thread of the
// workgroup calls reduce_rows (it holds barriers).

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
