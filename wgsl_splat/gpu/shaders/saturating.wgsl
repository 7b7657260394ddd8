// Saturating u32 sums for the prefix scans (prefix.wgsl, segment_scan.wgsl, scan.wgsl). The
// intersection counts of a large view with huge early splats can sum past 2^32 - 1: a wrapping sum
// would hide the overflow from the host and give a tile a start past its end (the rasteriser then
// walks ~2^32 entries). Saturated at U32_MAX every prefix stays non-decreasing, so each tile's
// range has start <= end, and the total exceeds any capacity, so the overflow is flagged.

const U32_MAX: u32 = 0xffffffffu;

fn add_sat(a: u32, b: u32) -> u32 {
    return select(a + b, U32_MAX, b > U32_MAX - a);
}
