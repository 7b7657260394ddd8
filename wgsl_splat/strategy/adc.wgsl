// 3DGS adaptive density control's per-row decision (NumPy twin: strategy/adc.py ADCDecision.numpy),
// run by the state's grow kernel (gpu/shaders/grow.wgsl). The thresholds it shares with the fast
// strategy are declared in split_clone_prune.wgsl; every one is a float32 the host computed so that
// no division or transcendental is needed here: the decisions are those of the NumPy path bit for
// bit.

struct DecisionParams {
#include "split_clone_prune.wgsl"
    screen: f32,          // largest screen radius kept (3e38: off)
}

fn decide(i: u32, may_grow: bool) -> Decision {
    let ga = stat_grad_accum(i);
    let denom = stat_denom(i);
    let ls = log_scales(i);
    let max_ls = max(max(ls.x, ls.y), ls.z);
    let high = ga >= dp.grad * max(denom, 1.0) && may_grow;
    let small = max_ls <= dp.log_clone;
    let clone = high && small;
    let split = high && !small;
    let faint = opacity_logit(i) < dp.logit_min;
    let big = max_ls > dp.log_world;
    var d: Decision;
    d.keep = !split && !faint && !big && !(stat_max_radii(i) > dp.screen);
    d.clone = clone && !faint && !big;
    d.split = split && !faint && !((max_ls - dp.log_div) > dp.log_world);
    d.cost = select(0u, 1u, clone) + select(0u, dp.samples - 1u, split);
    d.counts = vec3<u32>(select(0u, 1u, clone), select(0u, 1u, split), select(0u, 1u, denom > 0.0));
    d.peak = select(0.0, ga / denom, denom > 0.0);
    return d;
}
