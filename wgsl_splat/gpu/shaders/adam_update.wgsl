// Adam's update of one float (PyTorch's, docs/design.md §2), written once for every optimiser of
// the step: the parameters (adam.wgsl per lane, adam_sink.wgsl inside the projection backward
// pass) and the per-view corrections (appearance.wgsl, pose.wgsl). The operation order is the
// NumPy reference's, so that the float32 results are its own:
//   m ← m + (1 − β1)(g − m)     v ← β2·v + (1 − β2)·g²
// and the step in the form of each reference: the parameters' p − s·(m / (√v / √bc2 + ε))
// (contract/optim.py adam_step), the per-view terms' p − s·m / (√v · (1/√bc2) + ε)
// (contract/per_view.py adam_update). s is lr / (1 − β1^t), bc2 = 1 − β2^t.

struct AdamMoments {
    m: f32,
    v: f32,
}

// c1 = 1 − β1, b2 = β2, c2 = 1 − β2
fn adam_moments(g: f32, m: f32, v: f32, c1: f32, b2: f32, c2: f32) -> AdamMoments {
    let m_new = m + c1 * (g - m);
    var v_new = v * b2;
    v_new = v_new + c2 * (g * g);
    return AdamMoments(m_new, v_new);
}

fn adam_param_step(p: f32, mv: AdamMoments, step_size: f32, bc2_sqrt: f32, eps: f32) -> f32 {
    var denom = sqrt(mv.v);
    denom = denom / bc2_sqrt;
    denom = denom + eps;
    return p - step_size * (mv.m / denom);
}

fn adam_view_step(p: f32, mv: AdamMoments, step_size: f32, inv_bc2_sqrt: f32, eps: f32) -> f32 {
    return p - step_size * mv.m / (sqrt(mv.v) * inv_bc2_sqrt + eps);
}
