// Stable multi-pass LSD radix sort of (u32 key, u32 value) pairs; three dispatches per digit:
//   radix_hist    : thread t counts the digits of its contiguous chunk -> table[bin * T + t]
//   radix_scan    : one workgroup: exclusive scan of the table in (bin, thread) order
//   radix_scatter : thread t walks its chunk in order and writes each pair to table[bin*T+t]++
// Each thread processes its chunk serially, so the sort is stable without any workgroup-level
// ranking; T (threads) is fixed per sort and the chunk length is derived on the GPU from the element
// count (counters[stage.count_slot]), so the host never needs the count. Never a single-pass
// decoupled look-back sort (docs/design.md §3).

#include "common.wgsl"

struct RadixStage {
    shift: u32,       // first bit of this pass's digit
    bins: u32,        // 1 << digit bits (<= MAX_BINS)
    threads: u32,     // T
    count_slot: u32,  // counters[count_slot] = number of elements
    capacity: u32,    // the element count is clamped to this (buffer size)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

const MAX_BINS: u32 = {{MAX_BINS}}u;   // 1 << max digit bits, chosen by the host
const RADIX_WG: u32 = 64u;

@group(0) @binding(0) var<storage, read> keys_in: array<u32>;
@group(0) @binding(1) var<storage, read> vals_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> keys_out: array<u32>;
@group(0) @binding(3) var<storage, read_write> vals_out: array<u32>;
@group(0) @binding(4) var<storage, read_write> table: array<u32>;
@group(0) @binding(5) var<storage, read> counters: array<u32>;
@group(0) @binding(6) var<uniform> stage: RadixStage;  // dynamic

fn chunk_of(t: u32) -> vec2<u32> {
    let n = min(counters[stage.count_slot], stage.capacity);
    let items = (n + stage.threads - 1u) / stage.threads;
    let start = min(t * items, n);
    return vec2<u32>(start, min(start + items, n));
}

@compute @workgroup_size(RADIX_WG)
fn radix_hist(@builtin(local_invocation_index) lid: u32,
              @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = linear_workgroup(wid, nwg) * RADIX_WG + lid;
    let nt = stage.threads;
    if (t >= nt) {
        return;
    }
    var hist: array<u32, MAX_BINS>;
    let r = chunk_of(t);
    let mask = stage.bins - 1u;
    let shift = stage.shift;
    for (var i = r.x; i < r.y; i = i + 1u) {
        let d = (keys_in[i] >> shift) & mask;
        hist[d] = hist[d] + 1u;
    }
    for (var b = 0u; b < stage.bins; b = b + 1u) {
        table[b * nt + t] = hist[b];
    }
}

#include "segment_scan.wgsl"

@compute @workgroup_size(256)
fn radix_scan(@builtin(local_invocation_index) lid: u32) {
    let seg = segment_scan(lid, stage.bins * stage.threads);
    var run = seg.prefix;
    for (var i = seg.start; i < seg.end; i = i + 1u) {
        let v = table[i];
        table[i] = run;
        run = run + v;
    }
}

@compute @workgroup_size(RADIX_WG)
fn radix_scatter(@builtin(local_invocation_index) lid: u32,
                 @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = linear_workgroup(wid, nwg) * RADIX_WG + lid;
    let nt = stage.threads;
    if (t >= nt) {
        return;
    }
    var offs: array<u32, MAX_BINS>;
    for (var b = 0u; b < stage.bins; b = b + 1u) {
        offs[b] = table[b * nt + t];
    }
    let r = chunk_of(t);
    let mask = stage.bins - 1u;
    let shift = stage.shift;
    for (var i = r.x; i < r.y; i = i + 1u) {
        let k = keys_in[i];
        let d = (k >> shift) & mask;
        let p = offs[d];
        offs[d] = p + 1u;
        keys_out[p] = k;
        vals_out[p] = vals_in[i];
    }
}
