"""The training loop: outputs, exact resume, divergence and interruption handling, densification."""

import json
import os
import signal

import numpy as np
import pytest
from click.testing import CliRunner
from host_rounds import densify_host

from wgsl_splat.app.cli import main
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.data.default_scene import default_dataset
from wgsl_splat.data.ply import load_ply
from wgsl_splat.model import GaussianModel
from wgsl_splat.reference import rows
from wgsl_splat.reference.step import CpuTrainStep
from wgsl_splat.strategy import ADCConfig
from wgsl_splat.strategy.adc import ADCRound
from wgsl_splat.training.checkpoints import load_checkpoint
from wgsl_splat.training.config import preset
from wgsl_splat.training.errors import TrainingError
from wgsl_splat.training.startup import initial_count
from wgsl_splat.training.trainer import Trainer


def tiny_dataset():
    return default_dataset(resolution=6, eval_split=True, num_cameras=16, num_points=600)  # 32×32 views


def tiny_config(iters=24):
    cfg = preset("smoke")
    cfg.iters = iters
    cfg.eval_at, cfg.save_at = (iters,), (iters,)
    cfg.checkpoint_every = 8
    cfg.log_every = 4
    cfg.sh_increase_every = 6
    cfg.strategies["adc"] = ADCConfig(start=4, stop=20, every=4, opacity_reset_every=12, grad_threshold=1e-4)
    return cfg


def cpu_factory(arrays, spec):
    return CpuTrainStep(arrays, spec=spec)


def run(out, cfg, resume=None, factory=cpu_factory, on_step=None):
    losses = {}
    trainer = Trainer(tiny_dataset(), cfg, str(out), factory, log=lambda m: None)
    try:
        # per-step losses where the path has them for free (NumPy); the GPU path reads them in batches
        summary = trainer.run(resume=resume, on_step=on_step, progress=lambda it, loss, tr: losses.__setitem__(
            it, tr.step.last.loss if hasattr(tr.step, "last") else loss))
    finally:
        trainer.close()
    return trainer, summary, losses


def test_outputs_and_densification(tmp_path):
    trainer, summary, _ = run(tmp_path, tiny_config())
    assert summary["iterations"] == 24
    ply = tmp_path / "point_cloud" / "iteration_24" / "point_cloud.ply"
    model = load_ply(ply)
    assert model.sh_degree == 3 and len(model) == summary["num_gaussians"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    m = metrics["iteration_24"]
    assert m["split"] == "test" and m["views"] == 2 and 5 < m["mean"]["psnr"] < 60
    assert sorted(os.listdir(tmp_path / "test" / "iteration_24")) == ["view_000.png", "view_008.png"]
    assert json.loads((tmp_path / "cfg.json").read_text())["iters"] == 24
    log = (tmp_path / "train.log").read_text()
    assert "densify: N" in log and "opacity reset" in log and "it/s" in log
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["ckpt_000016.npz", "ckpt_000024.npz"]
    assert summary["num_gaussians"] != 600


def test_resume_continues_exactly(tmp_path):
    """NumPy path: a run resumed from its step-16 checkpoint follows the same loss curve and ends
    with the same parameters as the uninterrupted run (densification, opacity reset, RNG included)."""
    full, _, full_losses = run(tmp_path / "full", tiny_config())
    ckpt = tmp_path / "full" / "checkpoints" / "ckpt_000016.npz"
    resumed, summary, resumed_losses = run(tmp_path / "resumed", tiny_config(), resume=str(ckpt))
    assert summary["iterations"] == 24 and min(resumed_losses) == 17
    for it in range(17, 25):
        assert resumed_losses[it] == full_losses[it], it
    a, b = full.step.get_model(), resumed.step.get_model()
    for name in a.arrays():
        np.testing.assert_array_equal(a.arrays()[name], b.arrays()[name], err_msg=name)


def test_resume_latest_and_missing(tmp_path):
    run(tmp_path, tiny_config(8))
    cfg = tiny_config(12)
    _, summary, losses = run(tmp_path, cfg, resume="latest")
    assert min(losses) == 9 and summary["iterations"] == 12
    with pytest.raises(TrainingError, match="no checkpoint"):
        run(tmp_path / "empty", tiny_config(), resume="latest")


class NaNAfter(CpuTrainStep):
    """A step whose parameters blow up at a given iteration (as a diverging run would)."""

    bad_at = 11

    def step_batch(self, views, active_sh_degree=None, noise=None):
        self.count = getattr(self, "count", 0) + 1
        if self.count >= self.bad_at:
            self.model.means[0] = np.nan
        return super().step_batch(views, active_sh_degree, noise)


class ExplodesAfter(CpuTrainStep):
    """A run that collapses without overflowing, as a 100x learning rate does: once densification
    stopped (which would prune them) every Gaussian grows by e^3 per step, soon far beyond the
    scene, and the loss rises."""

    bad_at = 13

    def step_batch(self, views, active_sh_degree=None, noise=None):
        self.count = getattr(self, "count", 0) + 1
        if self.count >= self.bad_at:
            self.model.log_scales += 3.0
        return super().step_batch(views, active_sh_degree, noise)


class CollapsesToNothing(CpuTrainStep):
    """A run that collapses to nothing without overflowing, as 300x-1000x learning rates do on
    mouse -r 8 (measured: the loss of the bare background, N 4 443 -> 152, 4.1 dB, exit 0): 95 %
    of the Gaussians are transparent (pruned at the first densification), the rest faint and far
    away, so every view renders as the background."""

    def step_batch(self, views, active_sh_degree=None, noise=None):
        m = self.model
        self.start = getattr(self, "start", len(m))
        if len(m) == self.start:           # until the first densification prunes
            m.opacity_logits[:-30] = -20.0
            m.opacity_logits[-30:] = -4.6       # 0.01: kept, barely visible
        m.means[:] = 1e4
        return super().step_batch(views, active_sh_degree, noise)


def test_a_collapse_to_nothing_stops_the_run(tmp_path):
    cfg = tiny_config(16)
    start = initial_count(tiny_dataset(), cfg)       # the cloud's 600 and its background shell
    assert start > 600
    with pytest.raises(TrainingError, match="the model collapsed: it renders no better than the "
                       f"background alone .* and 30 of its {start} starting Gaussians are left at "
                       "step 8: training diverged and the checkpoint was not written; the last "
                       "good checkpoint is none"):
        run(tmp_path, cfg, factory=lambda a, s: CollapsesToNothing(a, spec=s))
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "point_cloud").exists()


@pytest.mark.parametrize("step_class, good, why", [
    (NaNAfter, [8], "parameters means are not finite"),
    (ExplodesAfter, [8], "times the scene extent at step 16: training diverged")])
def test_divergence_stops_and_keeps_last_good_checkpoint(tmp_path, step_class, good, why):
    cfg = tiny_config(16)
    cfg.strategies["adc"].stop = 12
    with pytest.raises(TrainingError, match=why) as info:
        run(tmp_path, cfg, factory=lambda a, s: step_class(a, spec=s))
    assert f"ckpt_{good[-1]:06d}.npz" in str(info.value) and "--lr-scale" in str(info.value)
    ckpts = sorted(os.listdir(tmp_path / "checkpoints"))
    assert ckpts == [f"ckpt_{k:06d}.npz" for k in good]
    assert not (tmp_path / "point_cloud").exists()       # no PLY from the diverged state
    meta, arrays = load_checkpoint(str(tmp_path / "checkpoints" / ckpts[0]))
    assert all(np.all(np.isfinite(v)) for v in arrays.model.arrays().values())


def test_interrupt_saves_a_checkpoint(tmp_path):
    def on_step(it, trainer):
        if it == 5:
            os.kill(os.getpid(), signal.SIGINT)

    _, summary, _ = run(tmp_path, tiny_config(), on_step=on_step)
    assert summary["interrupted"] and summary["iterations"] == 5
    assert "ckpt_000005.npz" in os.listdir(tmp_path / "checkpoints")


def make_model(n, rng, log_scale):
    model = GaussianModel.random(n, rng, sh_degree=1, dtype=np.float32)
    model.log_scales[:] = log_scale
    model.opacity_logits[:] = 0.0
    return model


def adc_round(extent, after_reset, cfg=None, key=0):
    """The round the ADC strategy runs (strategy/adc.py), for a scene of ``extent``."""
    cfg = cfg or ADCConfig()
    return ADCRound(cfg.grad_threshold, cfg.percent_dense * extent, cfg.split_samples,
                    cfg.split_scale_div, cfg.min_opacity,
                    cfg.max_world_scale * extent if after_reset else None,
                    cfg.max_screen_size if after_reset else 0.0, 10**9, key)


def test_densify_rules():
    rng = np.random.default_rng()
    extent = 2.0
    small = make_model(4, rng, np.log(0.005))   # ≤ 0.01·extent: clone
    large = make_model(4, rng, np.log(0.05))    # > 0.01·extent: split
    model = GaussianModel.concatenate([small, large])
    model.opacity_logits[3] = -10.0             # transparent: pruned
    a = HostArrays.fresh(model, ("grad_accum", "denom", "max_radii"))
    a.stats["denom"][:] = 2
    a.stats["grad_accum"][[0, 1, 4, 5]] = 2 * 3e-4   # above 2e-4 on average
    a.stats["grad_accum"][[2, 6]] = 2 * 1e-4         # below
    a.adam.m.means[:] = 1.0
    out, report = densify_host(a, adc_round(extent, False))
    assert (report.cloned, report.split, report.pruned) == (2, 2, 1)
    assert len(out) == 8 + 2 + 2 * 2 - 2 - 1 == len(out.adam) == len(out.stats["denom"])
    # split children have scale / 1.6 and sit around their parent
    children = out.model.subset(slice(len(out) - 4, None))
    np.testing.assert_allclose(np.exp(children.log_scales), 0.05 / 1.6, rtol=1e-5)
    parents = model.means[[4, 5, 4, 5]]  # samples are stacked sample-major: (s0 p4, s0 p5, s1 p4, s1 p5)
    assert np.all(np.linalg.norm(children.means - parents, axis=1) < 6 * 0.05)
    # new Gaussians start with zero moments, survivors keep theirs
    assert np.all(out.adam.m.means[:len(out) - 6] == 1.0) and np.all(out.adam.m.means[-6:] == 0.0)
    assert np.all(out.stats["grad_accum"] == 0)


def test_densify_prunes_large_after_reset_and_resets_opacity():
    rng = np.random.default_rng()
    model = make_model(3, rng, np.log(0.01))
    model.log_scales[0] = np.log(0.5)           # > 0.1·extent in the world
    a = HostArrays.fresh(model, ("grad_accum", "denom", "max_radii"))
    a.stats["max_radii"][1] = 25                # > 20 px on screen
    # default: the world-size test only (screen-size pruning is off, as effectively in 3DGS)
    out, report = densify_host(a, adc_round(2.0, True))
    assert len(out) == 2 and report.pruned == 1
    cfg = ADCConfig(max_screen_size=20.0)       # opt in: > 20 px on screen is pruned too
    out, report = densify_host(a, adc_round(2.0, True, cfg))
    assert len(out) == 1 and report.pruned == 2
    out.adam.m.opacity_logits[:] = 3.0
    rows.reset_opacity(out, 0.01)
    np.testing.assert_allclose(out.model.opacities, 0.01, rtol=1e-4)
    assert np.all(out.adam.m.opacity_logits == 0)


def test_train_command_end_to_end(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", "--preset", "smoke", "--iters", "6", "-r", "8",
                                       "--eval", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Results in" in result.output
    assert (out / "point_cloud" / "iteration_6" / "point_cloud.ply").exists()
    assert (out / "metrics.json").exists() and (out / "train.log").exists()


@pytest.mark.parametrize("args, message", [
    (["train", "/nonexistent/scene"], "does not exist"),
    (["train", "--eval-at", "x"], "comma-separated"),
])
def test_train_bad_input(args, message, tmp_path):
    result = CliRunner().invoke(main, args + ["--out", str(tmp_path), "--device", "cpu", "--iters", "2"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert message in result.output.lower() or message in result.output, result.output


def test_eval_command_re_evaluates_a_run(tmp_path):
    out = tmp_path / "run"
    runner = CliRunner()
    result = runner.invoke(main, ["train", "--preset", "smoke", "--iters", "4", "-r", "8", "--eval",
                                  "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["eval", str(out), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    # re-evaluating the saved PLY gives the numbers the trainer measured at the same step
    assert metrics["eval_iteration_4"]["mean"]["psnr"] == pytest.approx(metrics["iteration_4"]["mean"]["psnr"], abs=0.05)
    assert "fit_psnr" not in metrics["eval_iteration_4"]["mean"]     # not an --appearance run
    result = runner.invoke(main, ["eval", str(out), "--device", "cpu", "--colour-fit"])
    assert result.exit_code == 0 and "colour fitted" in result.output, result.output
    fitted = json.loads((out / "metrics.json").read_text())["eval_iteration_4"]["mean"]
    assert fitted["psnr"] == metrics["eval_iteration_4"]["mean"]["psnr"]
    assert fitted["fit_psnr"] > 0 and 0 < fitted["fit_ssim"] <= 1
    result = runner.invoke(main, ["eval", str(tmp_path / "nothing")])
    assert result.exit_code != 0 and "training output folder" in result.output


def test_evaluation_on_a_reset_step_sees_the_model_before_the_reset(tmp_path):
    """3DGS order: evaluate (and save) before the step's densification and opacity reset."""
    cfg = tiny_config(14)          # the reset step is not the last (none follows the last step)
    cfg.eval_at = cfg.save_at = (12, 14)
    cfg.strategies["adc"].opacity_reset_every = 12
    cfg.strategies["adc"].stop = 20
    after = {}
    run(tmp_path, cfg, on_step=lambda it, tr: it == 12 and after.setdefault(
        "opacities", tr.step.get_model().opacities.copy()))
    ply = load_ply(tmp_path / "point_cloud" / "iteration_12" / "point_cloud.ply")
    assert np.median(ply.opacities) > 0.011, "the saved model was taken after the reset"
    assert np.all(after["opacities"] <= 0.0101)   # the reset did happen after


def test_white_background_resets_opacity_at_the_first_densification(tmp_path):
    """3DGS (train.py): with a white background, opacity is also reset at densify_from_iter, so the
    initial fog is not densified; with another background only the periodic resets happen."""
    seen = {}

    def grab(it, trainer):
        if it == 4:
            seen["max_opacity"] = float(trainer.step.get_model().opacities.max())

    for background, reset in (((1.0, 1.0, 1.0), True), ((0.0, 0.0, 0.0), False)):
        cfg = tiny_config(6)
        cfg.background = background
        cfg.strategies["adc"].start = 4       # densify_now needs it > start: step 4 only resets
        trainer = Trainer(default_dataset(resolution=6, eval_split=True, num_cameras=16,
                                          num_points=600, background=background),
                          cfg, str(tmp_path / str(reset)), cpu_factory, log=lambda m: None)
        try:
            trainer.run(on_step=grab)
        finally:
            trainer.close()
        log = (tmp_path / str(reset) / "train.log").read_text()
        assert ("step 4: opacity reset" in log) == reset
        assert (seen["max_opacity"] <= 0.0101) == reset, seen


def test_a_one_image_scene_never_labels_its_training_image_held_out(tmp_path):
    """--eval on one image: the only view is trained on, so its metric is a training metric."""
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "photo.png")
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", str(tmp_path / "photo.png"), "--eval", "--preset",
                                       "smoke", "--iters", "2", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Training 1 views (0 held out)" in result.output
    final = json.loads((out / "metrics.json").read_text())["iteration_2"]
    assert final["split"] == "train" and final["views"] == 1
    assert "on 1 train views" in final["line"] and not (out / "test").exists()
    result = CliRunner().invoke(main, ["eval", str(out), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metrics.json").read_text())["eval_iteration_2"]["split"] == "train"


def test_a_densification_step_at_the_end_leaves_one_final_state(tmp_path):
    """The last step falls on the densification schedule: the final PLY, the final checkpoint and
    the summary hold the same model (the PLY held the state before a last densification)."""
    cfg = tiny_config(16)          # ADC every 4 steps from 4 to 20: step 16 is on the schedule
    trainer, summary, _ = run(tmp_path, cfg)
    ply = load_ply(tmp_path / "point_cloud" / "iteration_16" / "point_cloud.ply")
    _, arrays = load_checkpoint(str(tmp_path / "checkpoints" / "ckpt_000016.npz"))
    assert len(ply) == len(arrays.model) == summary["num_gaussians"]
    for name, x in ply.arrays().items():
        np.testing.assert_array_equal(x, arrays.model.arrays()[name], err_msg=name)
    assert "step 16: densify" not in (tmp_path / "train.log").read_text()
    assert "step 12: densify" in (tmp_path / "train.log").read_text()


def test_a_failing_final_evaluation_leaves_the_final_ply_and_checkpoint(tmp_path, monkeypatch):
    """The last step writes its PLY and checkpoint before the final evaluation, so an evaluation
    that raises costs the run nothing but its metrics; resuming the complete run evaluates it."""
    iters = int(np.random.default_rng().integers(5, 10))
    cfg = tiny_config(iters)
    cfg.eval_at = (4, iters)        # an intermediate evaluation still runs where it did
    real = Trainer.evaluate

    def evaluate(self, iteration):
        if iteration == iters:
            raise RuntimeError("evaluation broke")
        return real(self, iteration)

    monkeypatch.setattr(Trainer, "evaluate", evaluate)
    with pytest.raises(RuntimeError, match="evaluation broke"):
        run(tmp_path, cfg)
    ply = tmp_path / "point_cloud" / f"iteration_{iters}" / "point_cloud.ply"
    ckpt = tmp_path / "checkpoints" / f"ckpt_{iters:06d}.npz"
    assert ply.is_file() and ckpt.is_file(), f"iters={iters}"
    _, arrays = load_checkpoint(str(ckpt))
    assert len(load_ply(ply)) == len(arrays.model)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert list(metrics) == ["iteration_4"]
    assert "the final evaluation failed" in (tmp_path / "train.log").read_text()
    monkeypatch.setattr(Trainer, "evaluate", real)
    _, summary, _ = run(tmp_path, cfg, resume="latest")
    assert summary["iterations"] == iters
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert f"iteration_{iters}" in metrics and metrics[f"iteration_{iters}"]["views"] == 2


def test_emission_disagreements_are_noted_once_on_the_terminal_and_each_time_in_the_log(tmp_path):
    """A real GPU's emission passes can disagree on a few pairs every 100 steps (an H100 run of
    lego: 163 by step 5 000); the terminal says it once, train.log at every increase."""
    counts = {"emission_disagreements": 0}

    class Drifting(CpuTrainStep):
        counters = property(lambda self: dict(counts))

    def drift(it, trainer):
        counts["emission_disagreements"] = {4: 2, 12: 5}.get(it, counts["emission_disagreements"])

    echoed = []
    trainer = Trainer(tiny_dataset(), tiny_config(), str(tmp_path),
                      lambda arrays, spec: Drifting(arrays, spec=spec), log=echoed.append)
    try:
        trainer.run(on_step=drift)
    finally:
        trainer.close()
    on_terminal = [m for m in echoed if "emission passes disagreed" in m]
    assert len(on_terminal) == 1 and "by step 8" in on_terminal[0] and "on 2 " in on_terminal[0]
    in_log = [m for m in (tmp_path / "train.log").read_text().splitlines()
              if "emission passes disagreed" in m]
    assert [("by step 8" in m and "on 2 " in m, "by step 16" in m and "on 5 " in m)
            for m in in_log] == [(True, False), (False, True)], in_log


def test_the_steps_queued_before_a_round_are_waited_for_as_theirs(tmp_path):
    """Before each densification round (it reads the device back) the trainer waits for the
    queued steps, so that their device time is counted as "device wait", not "densify" (an H100
    run of lego put 36 % of its wall time under "densify"). Rounds of tiny_config's ADC: steps 8,
    12 and 16 (start 4 < it < stop 20, every 4)."""
    reported, waited = [0], []

    class Counting(CpuTrainStep):
        def synchronize(self):
            waited.append(reported[0] + 1)     # refine(it) runs before report(it)

    trainer = Trainer(tiny_dataset(), tiny_config(), str(tmp_path),
                      lambda arrays, spec: Counting(arrays, spec=spec), log=lambda m: None)
    try:
        trainer.run(on_step=lambda it, tr: reported.__setitem__(0, it))
    finally:
        trainer.close()
    due = [it for it in range(1, 25) if trainer.strategy.round_due(it)]
    assert due == [8, 12, 16] and waited == due, (due, waited)
    rounds = [int(line.split("step ")[1].split(":")[0])
              for line in (tmp_path / "train.log").read_text().splitlines() if ": densify: N " in line]
    assert rounds == due, rounds      # round_due says when the hook runs its rounds
