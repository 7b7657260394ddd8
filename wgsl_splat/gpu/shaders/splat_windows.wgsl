// Splat records beyond one storage binding (gpu/pages.py): ids below rp.grid.w are in `splats`,
// the others in `splats_hi`. The including module declares both (and `rp`).

fn splat_at(g: u32) -> Splat2D {
    if (g < rp.grid.w) {
        return splats[g];
    }
    return splats_hi[g - rp.grid.w];
}
