// The tile test of both emissions (emit.wgsl, emit_splats.wgsl): whether a splat's α ≥ ALPHA_MIN
// ellipse reaches the rectangle of a tile's pixel centres (reference: projection.tile_pairs_kept).
// The including module declares `rp` and includes splat_windows.wgsl.

// What the tile test needs of a splat: its mean, conic (a, b, c) and the bound on q = dᵀ·conic·d
// (reference: projection.tile_q_bound).
struct Ellipse {
    mean: vec2<f32>,
    conic: vec3<f32>,
    q_max: f32,
}

fn splat_ellipse(g: u32) -> Ellipse {
    let s = splat_at(g);
    return Ellipse(s.xy, s.conic, alpha_q_bound(s.opacity));
}

// Whether the ellipse reaches the pixel centres' rectangle of tile (tx, ty): the least q over the
// rectangle (reference: projection.tile_min_q, which explains the two edge minima) against q_max.
fn tile_hit(e: Ellipse, tx: u32, ty: u32, q_scale: f32) -> bool {
    let ts = f32(TILE_SIZE);
    let lo = vec2<f32>(f32(tx), f32(ty)) * ts + vec2<f32>(0.5);
    let hi = min(lo + vec2<f32>(ts - 1.0), vec2<f32>(f32(rp.img.x), f32(rp.img.y)) - vec2<f32>(0.5));
    let a = e.conic.x;
    let b = e.conic.y;
    let c = e.conic.z;
    let dx = clamp(e.mean.x, lo.x, hi.x) - e.mean.x;
    let dy1 = clamp(e.mean.y - b * dx / c, lo.y, hi.y) - e.mean.y;
    let dy = clamp(e.mean.y, lo.y, hi.y) - e.mean.y;
    let dx2 = clamp(e.mean.x - b * dy / a, lo.x, hi.x) - e.mean.x;
    let q1 = a * dx * dx + 2.0 * b * dx * dy1 + c * dy1 * dy1;
    let q2 = a * dx2 * dx2 + 2.0 * b * dx2 * dy + c * dy * dy;
    return min(q1, q2) <= e.q_max * q_scale;
}
