// Exclusive prefix sum of a u32 buffer over many workgroups, for GPUs (reduce, then scan); the
// sums saturate at U32_MAX (saturating.wgsl):
//
//   scan_reduce : workgroup b sums its block data[b*1024 .. +1024) -> block_sums[b]
//   scan_blocks : one workgroup: exclusive scan of the block sums in place; the grand total goes
//                 to block_sums[blocks]
//   scan_apply  : workgroup b scans its block locally (4 entries per thread, a Hillis-Steele scan
//                 of the 256 thread sums in workgroup memory) and adds block_sums[b]
//
// Used for the (bin, thread) table of the radix sort and the (tile, chunk) table of the emission
// when they are too long for one workgroup to scan quickly. CPU adapters keep the one-workgroup
// scans (radix.wgsl, scan.wgsl): there a barrier costs ~18 us and two cores gain nothing from more
// workgroups. The length and the block count come from the host (both tables have host-known
// sizes); the grid is 2D beyond 65 535 blocks.

#include "saturating.wgsl"

struct ScanParams {
    length: u32,      // entries to scan
    blocks: u32,      // ceil(length / 1024)
    grid_x: u32,      // workgroups per grid row
    pad: u32,
}

@group(0) @binding(0) var<uniform> sp: ScanParams;
@group(0) @binding(1) var<storage, read_write> data: array<u32>;
@group(0) @binding(2) var<storage, read_write> block_sums: array<u32>;   // blocks + 1 entries

const WG: u32 = 256u;
const PER: u32 = 4u;
const BLOCK: u32 = WG * PER;

var<workgroup> s_sum: array<u32, 256>;

// Exclusive scan of one value per thread across the workgroup; returns (exclusive prefix, total).
fn workgroup_exclusive_scan(lid: u32, v: u32) -> vec2<u32> {
    s_sum[lid] = v;
    workgroupBarrier();
    for (var off = 1u; off < WG; off = off << 1u) {
        var other = 0u;
        if (lid >= off) {
            other = s_sum[lid - off];
        }
        workgroupBarrier();
        s_sum[lid] = add_sat(s_sum[lid], other);
        workgroupBarrier();
    }
    // the inclusive prefix of the thread before (inclusive - v is wrong once saturated)
    var exclusive = 0u;
    if (lid > 0u) {
        exclusive = s_sum[lid - 1u];
    }
    let total = s_sum[WG - 1u];
    workgroupBarrier();
    return vec2<u32>(exclusive, total);
}

@compute @workgroup_size(WG)
fn scan_reduce(@builtin(local_invocation_index) lid: u32,
               @builtin(workgroup_id) wid: vec3<u32>) {
    let b = wid.x + wid.y * sp.grid_x;
    if (b >= sp.blocks) {
        return;     // uniform per workgroup
    }
    let base = b * BLOCK + lid * PER;
    var sum = 0u;
    for (var j = 0u; j < PER; j = j + 1u) {
        if (base + j < sp.length) {
            sum = add_sat(sum, data[base + j]);
        }
    }
    let r = workgroup_exclusive_scan(lid, sum);
    if (lid == 0u) {
        block_sums[b] = r.y;
    }
}

@compute @workgroup_size(WG)
fn scan_blocks(@builtin(local_invocation_index) lid: u32) {
    let n = sp.blocks;
    let seg = (n + WG - 1u) / WG;
    let s = min(lid * seg, n);
    let e = min(s + seg, n);
    var sum = 0u;
    for (var i = s; i < e; i = i + 1u) {
        sum = add_sat(sum, block_sums[i]);
    }
    let r = workgroup_exclusive_scan(lid, sum);
    var run = r.x;
    for (var i = s; i < e; i = i + 1u) {
        let v = block_sums[i];
        block_sums[i] = run;
        run = add_sat(run, v);
    }
    if (lid == 0u) {
        block_sums[n] = r.y;
    }
}

@compute @workgroup_size(WG)
fn scan_apply(@builtin(local_invocation_index) lid: u32,
              @builtin(workgroup_id) wid: vec3<u32>) {
    let b = wid.x + wid.y * sp.grid_x;
    if (b >= sp.blocks) {
        return;
    }
    let base = b * BLOCK + lid * PER;
    var v: array<u32, 4>;
    var sum = 0u;
    for (var j = 0u; j < PER; j = j + 1u) {
        v[j] = 0u;
        if (base + j < sp.length) {
            v[j] = data[base + j];
        }
        sum = add_sat(sum, v[j]);
    }
    var run = add_sat(workgroup_exclusive_scan(lid, sum).x, block_sums[b]);
    for (var j = 0u; j < PER; j = j + 1u) {
        if (base + j < sp.length) {
            data[base + j] = run;
        }
        run = add_sat(run, v[j]);
    }
}
