// Stage 2: exclusive prefix sum of the per-chunk tile counts (one workgroup), and the counters
// every later stage reads instead of asking the host:
//   counters[0] = total intersections, counters[1] = min(total, capacity),
//   counters[3] = 1 if total > capacity (the host grows the buffers and renders again).
// The number of chunks T is small (a few hundred to a few thousand), so one workgroup suffices.

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read_write> chunk: array<u32>;
@group(0) @binding(2) var<storage, read_write> counters: array<u32>;

var<workgroup> partial: array<u32, 256>;

@compute @workgroup_size(256)
fn scan_counts(@builtin(local_invocation_index) lid: u32) {
    let len = rp.grid.z;
    let seg = (len + 255u) / 256u;
    let s = min(lid * seg, len);
    let e = min(s + seg, len);
    var sum = 0u;
    for (var i = s; i < e; i = i + 1u) {
        sum = sum + chunk[i];
    }
    partial[lid] = sum;
    workgroupBarrier();
    if (lid == 0u) {
        var run = 0u;
        for (var k = 0u; k < 256u; k = k + 1u) {
            let v = partial[k];
            partial[k] = run;
            run = run + v;
        }
        let cap = rp.model.w;
        counters[0] = run;
        counters[1] = min(run, cap);
        counters[2] = 0u;
        counters[3] = select(0u, 1u, run > cap);
    }
    workgroupBarrier();
    var run = partial[lid];
    for (var i = s; i < e; i = i + 1u) {
        let v = chunk[i];
        chunk[i] = run;
        run = run + v;
    }
}
