// The fast strategy's per-row decision (NumPy twin: strategy/fast.py FastDecision.numpy), run by
// the state's grow kernel (gpu/shaders/grow.wgsl). A row may grow when its mean screen-space
// gradient passes 3DGS's threshold and, over the views observed this round, it is composited into
// enough high-error pixels (FastGS's multi-view consistency); it is pruned when it is nearly
// transparent or, once the views were observed, when it blended into almost nothing. The
// thresholds it shares with ADC are declared in split_clone_prune.wgsl; every one is a float32 the
// host computed, so no division or transcendental is needed here and both paths decide alike bit
// for bit.

struct DecisionParams {
#include "split_clone_prune.wgsl"
    err_min: f32,         // α·T-weighted high-error pixels over the observed views, to grow
    weight_min: f32,      // α·T summed over the observed views below which a row is pruned
}

fn decide(i: u32, may_grow: bool) -> Decision {
    let ga = stat_grad_accum(i);
    let denom = stat_denom(i);
    let ls = log_scales(i);
    let max_ls = max(max(ls.x, ls.y), ls.z);
    let wanted = ga >= dp.grad * max(denom, 1.0) && stat_fast_err_pixels(i) >= dp.err_min;
    let high = wanted && may_grow;
    let small = max_ls <= dp.log_clone;
    let clone = high && small;
    let split = high && !small;
    let gone = opacity_logit(i) < dp.logit_min || stat_fast_weight(i) < dp.weight_min
        || max_ls > dp.log_world;
    var d: Decision;
    d.keep = !split && !gone;
    d.clone = clone && !gone;
    d.split = split && !gone && !((max_ls - dp.log_div) > dp.log_world);
    d.cost = select(0u, select(dp.samples - 1u, 1u, small), wanted && !gone);
    d.counts = vec3<u32>(select(0u, 1u, d.clone), select(0u, 1u, d.split), select(0u, 1u, gone));
    d.peak = stat_fast_err(i);
    return d;
}
