// Splat records beyond one storage binding (gpu/pages.py): ids below rp.grid.w are in `splats`,
// the others in `splats_hi`. The including module declares both (and `rp`). An id at or past N
// (NULL_SPLAT, a slot emission could not fill) reads as a splat that covers nothing.

fn splat_at(g: u32) -> Splat2D {
    if (g < rp.grid.w) {
        return splats[g];
    }
    if (g >= rp.model.x) {     // NULL_SPLAT (emit.wgsl): zero opacity and conic, covers nothing
        return Splat2D(vec2<f32>(0.0), 0.0, 0.0, vec3<f32>(0.0), 0.0, vec3<f32>(0.0), 0u);
    }
    return splats_hi[g - rp.grid.w];
}
