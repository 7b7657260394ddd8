// One-workgroup exclusive scan of table[0, len) in place, for a table too small to need prefix.wgsl:
// shared by scan.wgsl (tile counts on CPU adapters) and radix.wgsl (digit histograms). The
// including module declares `table: array<u32>` (read_write) and runs with @workgroup_size(256).
// Thread lid owns the contiguous segment [start, end): it sums it, one thread scans the 256 sums
// (a serial pass is cheapest on CPU adapters, where barriers cost more than the arithmetic), and
// segment_scan returns the segment with its exclusive prefix; the caller walks it. Sums saturate at
// U32_MAX (saturating.wgsl).

#include "saturating.wgsl"

struct Segment {
    start: u32,
    end: u32,
    prefix: u32,    // sum of table[0, start)
    total: u32,     // sum of table[0, len)
}

var<workgroup> seg_partial: array<u32, 256>;
var<workgroup> seg_total: u32;

fn segment_scan(lid: u32, len: u32) -> Segment {
    let seg = (len + 255u) / 256u;
    let s = min(lid * seg, len);
    let e = min(s + seg, len);
    var sum = 0u;
    for (var i = s; i < e; i = i + 1u) {
        sum = add_sat(sum, table[i]);
    }
    seg_partial[lid] = sum;
    workgroupBarrier();
    if (lid == 0u) {
        var run = 0u;
        for (var k = 0u; k < 256u; k = k + 1u) {
            let v = seg_partial[k];
            seg_partial[k] = run;
            run = add_sat(run, v);
        }
        seg_total = run;
    }
    workgroupBarrier();
    return Segment(s, e, seg_partial[lid], seg_total);
}
