"""One output folder holds one run: refusal, --overwrite, the lock, signals, resume (its own
configuration, dataset checks, damaged checkpoints, temp files), and what is not a checkpoint."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner
from test_trainer import cpu_factory, run, tiny_config

from wgsl_splat.app.cli import main
from wgsl_splat.app.run_dir import RunLock
from wgsl_splat.contract.optim import LR_GROUPS
from wgsl_splat.data.default_scene import default_dataset
from wgsl_splat.training.config import TrainConfig
from wgsl_splat.training.errors import TrainingError
from wgsl_splat.training.startup import initial_count
from wgsl_splat.training.trainer import Trainer

QUICK = ["--preset", "smoke", "-r", "8", "--device", "cpu"]


def train(out, *args):
    return CliRunner().invoke(main, ["train", *QUICK, "--out", str(out), *args])


def assert_one_line_error(result, message):
    assert result.exit_code == 1, result.output
    assert message in result.output, result.output
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-step CLI run with a non-default configuration (the first train of the module)."""
    out = tmp_path_factory.mktemp("runs") / "finished"
    res = train(out, "--iters", "2", "--eval-at", "1,2", "--lr-scale", "0.5", "--seed", "3")
    assert res.exit_code == 0, res.output
    return out


def test_a_second_run_into_a_used_folder_is_refused(finished):
    before = sorted(os.listdir(finished / "checkpoints"))
    res = train(finished, "--iters", "2")
    assert_one_line_error(res, "is not empty")
    assert "--resume latest" in res.output and "--overwrite" in res.output
    assert sorted(os.listdir(finished / "checkpoints")) == before


def test_overwrite_removes_only_what_a_run_writes(tmp_path):
    out = tmp_path / "run"
    assert train(out, "--iters", "2").exit_code == 0
    (out / "notes.txt").write_text("mine")
    mine = out / "point_cloud" / "mine.txt"        # the user's file inside a folder a run writes
    mine.write_text("mine")
    before = sorted(str(p) for p in out.rglob("*"))
    res = train(out, "--iters", "1", "--overwrite")
    assert_one_line_error(res, "and point_cloud/mine.txt was not written by it")
    assert sorted(str(p) for p in out.rglob("*")) == before      # refused before touching
    mine.unlink()
    res = train(out, "--iters", "1", "--overwrite")
    assert res.exit_code == 0, res.output
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(out / "point_cloud")) == ["iteration_1"]   # iteration_2 went
    assert sorted(os.listdir(out / "checkpoints")) == ["ckpt_000001.npz"]
    assert_one_line_error(train(out, "--resume", "latest", "--overwrite"), "pass one")


def test_a_run_never_removes_a_users_folders(tmp_path):
    """Folders named as a run's outputs (train/, test/) with the user's files, and no record of
    a run writing them: neither a new run nor --overwrite touches them."""
    out = tmp_path / "d"
    (out / "train").mkdir(parents=True)
    (out / "test").mkdir()
    (out / "train" / "labels.csv").write_text("keep")
    (out / "cfg.json").write_text("{}")
    assert_one_line_error(train(out, "--iters", "1"), "is not empty")
    res = train(out, "--iters", "1", "--overwrite")
    assert_one_line_error(res, "was not written by it (the folder has no .wgsl_splat_written")
    assert (out / "train" / "labels.csv").read_text() == "keep"
    assert sorted(os.listdir(out)) == [".lock", "cfg.json", "test", "train"]


def test_an_output_folder_in_or_around_the_data_is_refused(tmp_path):
    """A Blender-like scene: --out the scene (with --overwrite), inside it, or around it is refused
    before anything is touched (--overwrite once deleted its train/ and test/ images)."""
    scene = tmp_path / "scene"
    for sub in ("train", "test"):
        (scene / sub).mkdir(parents=True)
        (scene / sub / "r_0.png").write_bytes(b"an image")
    (scene / "transforms_train.json").write_text("{}")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for out, where in ((scene, "is"), (scene / "output", "lies inside"), (tmp_path, "holds")):
        res = CliRunner().invoke(main, ["train", str(scene), *QUICK, "--out", str(out),
                                        "--overwrite"])
        assert_one_line_error(res, f"{where} the training data")
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_second_process_is_stopped_by_the_lock(tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    with RunLock(str(out)).acquire():      # another open file description: flock conflicts
        res = train(out, "--iters", "1")
        assert_one_line_error(res, f"in use by another wgsl_splat process (pid {os.getpid()})")
        assert os.listdir(out) == [".lock"]
    assert train(out, "--iters", "1").exit_code == 0    # released with its holder


def test_eval_refuses_a_run_another_process_holds(finished):
    with RunLock(str(finished)).acquire():    # a training still writing into the folder
        res = CliRunner().invoke(main, ["eval", str(finished), "--device", "cpu"])
    assert_one_line_error(res, "in use by another wgsl_splat process")


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_save_a_checkpoint_and_the_named_ply(tmp_path, sig, code):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "wgsl_splat", "train", *QUICK, "--iters",
                             "100000", "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while "training steps" not in _read(out / "train.log"):   # the handlers are installed
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, output
    step = int(output.split(f"Interrupted by {sig.name} at step ")[1].split(":")[0])
    assert (out / "point_cloud" / f"iteration_{step}" / "point_cloud.ply").is_file()
    assert (out / "checkpoints" / f"ckpt_{step:06d}.npz").is_file()
    assert "--resume latest" in output and "Traceback" not in output
    assert (f"Continue with: {sys.executable} -m wgsl_splat train --out {out} --resume latest "
            f"--device cpu\n") in output, output


def _read(path):
    return path.read_text() if path.exists() else ""


def test_training_steps_is_logged_once_a_signal_stops_the_run_cleanly(tmp_path, monkeypatch):
    """The signal tests above (and test_parallel's) send theirs once this line is in train.log:
    the trainer's stop handler must be installed by then (it was logged before, and a signal in
    between took the CLI's plain exit, with no message and no checkpoint)."""
    seen = []
    log = Trainer.log

    def recording(self, msg, echo=True):
        if msg.startswith("training steps"):
            seen.append((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)))
        return log(self, msg, echo)

    monkeypatch.setattr(Trainer, "log", recording)
    res = CliRunner().invoke(main, ["train", *QUICK, "--iters", "1", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert len(seen) == 1
    assert all(getattr(h, "__name__", "") == "on_stop_signal" for h in seen[0]), seen


def test_resume_keeps_the_runs_own_configuration(finished):
    res = CliRunner().invoke(main, ["train", "--out", str(finished), "--resume", "latest",
                                    "--device", "cpu"])          # no --preset, -r, --seed, ...
    assert res.exit_code == 0, res.output
    assert "the run is complete: step 2 of 2" in res.output
    assert "point_cloud/iteration_2/point_cloud.ply" in res.output
    cfg = json.loads((finished / "cfg.json").read_text())
    assert (cfg["iters"], cfg["seed"], cfg["eval_at"], cfg["optim"]["lr_scale"]) == (2, 3, [1, 2], 0.5)
    assert cfg["run"]["resolution"] == 8 and cfg["run"]["preset"] == "smoke"
    for args, flag in ((["--iters", "5"], "--iters 5"), (["-r", "4"], "-r/--resolution 4"),
                       (["--preset", "fast"], "--preset fast"), (["--seed", "4"], "--seed 4"),
                       (["--lr-scale", "2"], "--lr-scale 2.0")):
        res = CliRunner().invoke(main, ["train", "--out", str(finished), "--resume", "latest",
                                        *args])
        assert_one_line_error(res, f"{flag} disagrees with the run being resumed")
    agreeing = CliRunner().invoke(main, ["train", *QUICK, "--seed", "3", "--out", str(finished),
                                         "--resume", "latest"])
    assert agreeing.exit_code == 0, agreeing.output


def test_a_resumed_run_continues_on_the_path_it_trained_on(finished):
    """The finished run trained with --device cpu; --resume latest alone continues on the NumPy
    path (the GPU adapter is there: auto would pick it) and says so; --device given again wins."""
    res = CliRunner().invoke(main, ["train", "--out", str(finished), "--resume", "latest"])
    assert res.exit_code == 0, res.output
    assert "continuing on --device cpu, as the run trained" in res.output
    assert "on cpu (NumPy reference)" in res.output
    res = CliRunner().invoke(main, ["train", "--out", str(finished), "--resume", "latest",
                                    "--device", "cpu"])
    assert res.exit_code == 0 and "continuing on" not in res.output, res.output


def test_sigterm_during_eval_leaves_no_temp_file(finished, tmp_path):
    """SIGTERM while eval --scales writes a render: the write's temp file goes with the process
    (exit 143); one left by a harder stop is removed by the next eval."""
    script = f"""
import os, signal, sys
import wgsl_splat.atomic_io as io
from wgsl_splat.app.cli import main
real, calls = io._open_temp, []
def open_temp(tmp):
    f = real(tmp)
    calls.append(tmp)
    if len(calls) == 3:                  # mid-way: the temp file exists, its target not yet
        os.kill(os.getpid(), signal.SIGTERM)
    return f
io._open_temp = open_temp
sys.argv = ["wgsl_splat", "eval", {str(finished)!r}, "--scales", "1,0.5", "--device", "cpu"]
main()
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 143, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not [p for p in finished.rglob("*.tmp")]
    from wgsl_splat.atomic_io import WriteRecord

    metrics = finished / "metrics.json"
    WriteRecord(finished).add(metrics)
    left = finished / ".metrics.json.0123456789ab.tmp"          # as SIGKILL would leave it
    left.write_bytes(b"half")
    res = CliRunner().invoke(main, ["eval", str(finished), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert not left.exists() and "left by an interrupted write" in res.output


def test_resume_refuses_another_dataset_or_resolution(tmp_path):
    run(tmp_path, tiny_config(8))
    other = default_dataset(resolution=4, eval_split=True, num_cameras=16, num_points=600)
    trainer = Trainer(other, tiny_config(12), str(tmp_path), None, log=lambda m: None)
    with pytest.raises(TrainingError, match="trained on 14 training \\+ 2 test views of 32x32 px, "
                                            "this dataset has 14 training \\+ 2 test views of 48x48"):
        trainer.run(resume="latest")
    trainer.close()


def test_resume_falls_back_to_the_newest_intact_checkpoint(tmp_path):
    cfg = tiny_config(8)
    cfg.checkpoint_every = 4
    run(tmp_path, cfg)                                  # checkpoints at 4 and 8
    ckpts = tmp_path / "checkpoints"
    data = (ckpts / "ckpt_000008.npz").read_bytes()
    (ckpts / "ckpt_000008.npz").write_bytes(data[: len(data) // 2])   # a copy cut short
    logged = []
    trainer = Trainer(default_dataset(resolution=6, eval_split=True, num_cameras=16,
                                      num_points=600), cfg, str(tmp_path), cpu_factory,
                      log=logged.append)
    summary = trainer.run(resume="latest")
    trainer.close()
    assert any("ckpt_000008.npz is damaged" in m and "renamed" in m for m in logged), logged
    assert any("resumed from" in m and "ckpt_000004.npz at step 4" in m for m in logged), logged
    assert summary["iterations"] == 8
    assert sorted(os.listdir(ckpts)) == ["ckpt_000004.npz", "ckpt_000008.npz",
                                         "ckpt_000008.npz.damaged"]


def test_resume_cleans_temp_files_and_refuses_what_is_not_a_checkpoint(finished, tmp_path):
    from wgsl_splat.atomic_io import WriteRecord

    orphans = [finished / "checkpoints" / ".ckpt_000003.npz.0123456789ab.tmp",
               finished / ".metrics.json.abcdef012345.tmp"]
    WriteRecord(finished).add(finished / "checkpoints" / "ckpt_000003.npz")   # as a crash leaves it
    for p in orphans:
        p.write_bytes(b"half a write")
    not_ours = finished / "checkpoints" / ".notes.txt.0123456789ab.tmp"   # no write of ours
    not_ours.write_bytes(b"the user's")
    res = CliRunner().invoke(main, ["train", "--out", str(finished), "--resume", "latest",
                                    "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert not any(p.exists() for p in orphans)
    assert "left by an interrupted write" in res.output
    assert not_ours.read_bytes() == b"the user's"
    not_ours.unlink()
    ply = finished / "point_cloud" / "iteration_2" / "point_cloud.ply"
    assert_one_line_error(train(tmp_path / "new", "--resume", str(ply)), "is a PLY model, not a checkpoint")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    assert_one_line_error(train(tmp_path / "new", "--resume", str(empty)), "is empty")


def test_resume_from_an_older_checkpoint_of_the_same_run_is_refused(tmp_path):
    cfg = tiny_config(8)
    cfg.checkpoint_every = 4
    run(tmp_path, cfg)
    with pytest.raises(TrainingError, match="not the newest checkpoint of this run"):
        run(tmp_path, cfg, resume=str(tmp_path / "checkpoints" / "ckpt_000004.npz"))


def test_a_fallback_is_logged_and_done_counts_this_sessions_steps(tmp_path):
    """--resume latest past a damaged checkpoint: the fall-back is printed and in train.log, and
    the done: line counts the steps this session trained, not the ones before the resume."""
    from wgsl_splat.training.config import preset

    cfg = preset("smoke")
    cfg.iters, cfg.checkpoint_every, cfg.eval_at, cfg.save_at = 4, 1, (4,), (4,)
    dataset = default_dataset(resolution=8, eval_split=False, background=cfg.background)
    trainer = Trainer(dataset, cfg, str(tmp_path), cpu_factory, log=lambda m: None,
                      run_info=dict(data="default", resolution=8, eval_split=False, preset="smoke"))
    summary = trainer.run()
    trainer.close()
    assert summary["iterations"] == 4
    newest = tmp_path / "checkpoints" / "ckpt_000004.npz"
    newest.write_bytes(newest.read_bytes()[:100])        # cut short
    res = CliRunner().invoke(main, ["train", "--out", str(tmp_path), "--resume", "latest",
                                    "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "ckpt_000004.npz is damaged" in res.output
    log = (tmp_path / "train.log").read_text()
    assert "ckpt_000004.npz is damaged" in log and "trying the one before" in log
    assert "done: 4 steps in" in log and "done: 1 steps (4..4) in" in log


def test_what_can_be_refused_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "run"
    assert_one_line_error(train(out, "--batch-size", "10", "--iters", "1"), "batch size 10: must be 1..9")
    assert not out.exists()
    res = train(out, "--strategy", "mcmc", "--cap-max", "100", "--iters", "1")
    start = initial_count(default_dataset(resolution=8), TrainConfig())   # 3 000 and the shell
    assert start > 3000
    assert_one_line_error(res, f"--cap-max 100 is below the {start} Gaussians the run starts with")
    assert "decoding images" not in res.output and "init:" not in res.output
    assert os.listdir(out) == [".lock"]
    res = train(out, "--strategy", "mcmc", "--cap-max", str(start), "--iters", "1")   # corrected
    assert res.exit_code == 0, res.output


def test_a_run_that_wrote_no_checkpoint_does_not_block_its_out(tmp_path, monkeypatch):
    """A run that stopped before its first checkpoint (here: its first step fails, after its log
    and cfg.json are written) cannot be resumed and holds nothing to lose: the same command trains
    there, its log goes on. A file the run did not write makes the folder the user's again."""
    out = tmp_path / "run"

    def fails(self, s):
        raise TrainingError("the first step failed")

    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_step", fails)
        assert_one_line_error(train(out, "--iters", "1"), "the first step failed")
    assert (out / "cfg.json").is_file() and not (out / "checkpoints").exists()
    assert_one_line_error(train(out, "--resume", "latest"),
                          "the run stopped before writing one; start it again without --resume")
    first_log = (out / "train.log").read_text()
    res = train(out, "--iters", "1")
    assert res.exit_code == 0, res.output
    assert "stopped before its first checkpoint" in res.output
    log = (out / "train.log").read_text()
    assert log.startswith(first_log) and "done: 1 steps" in log
    assert json.loads((out / "cfg.json").read_text())["iters"] == 1
    (out / "checkpoints" / "ckpt_000001.npz").unlink()    # a PLY is left: that run is refused
    assert_one_line_error(train(out, "--iters", "1"), "is not empty")
    for p in sorted(out.rglob("*"), reverse=True):       # only a log and the user's file
        if p.name not in ("train.log", ".lock", ".wgsl_splat_written"):
            p.unlink() if p.is_file() else p.rmdir()
    (out / "test").mkdir()
    (out / "test" / "labels.csv").write_text("keep")
    assert_one_line_error(train(out, "--iters", "1"), "is not empty")
    assert (out / "test" / "labels.csv").read_text() == "keep"


def test_the_resume_command_continues_the_same_run(monkeypatch):
    """What the interrupt prints: the devices, the path, MPI and the data stay (following a command
    that dropped --devices 0,0 trained on one device)."""
    import shlex
    import types

    from wgsl_splat.app.run_request import RunRequest, resume_command

    monkeypatch.setattr(sys, "argv", ["/x/venv/lib/python3/site-packages/wgsl_splat/__main__.py"])
    run = RunRequest(data="/data/my scene", out_dir="runs/a", resolution=4, eval_split=True,
                     preset="fast", device="gpu", adapter_filter="llvm", devices="0,0",
                     preview=True)
    cmd = shlex.split(resume_command(run))
    assert cmd == [sys.executable, "-m", "wgsl_splat", "train", "/data/my scene", "--out", "runs/a",
                   "--resume", "latest", "--device", "gpu", "--adapter", "llvm", "--devices", "0,0",
                   "--preview"]
    monkeypatch.setattr(sys, "argv", ["/x/venv/bin/wgsl_splat"])
    world = types.SimpleNamespace(size=4, rank=0)
    run = RunRequest(data="default", out_dir="o", resolution=4, eval_split=True, preset="fast")
    cmd = shlex.split(resume_command(run, world))
    assert cmd == ["mpirun", "-n", "4", "/x/venv/bin/wgsl_splat", "train", "--out", "o", "--resume",
                   "latest", "--distributed"]


def test_a_full_disk_is_one_line_naming_the_file_and_the_intact_checkpoint(tmp_path, monkeypatch):
    """The disk fills up while the step-4 checkpoint is written (ENOSPC from the write, as a 3 MB
    tmpfs gives it): one line with the file and the checkpoint that is intact, no temp file left,
    and the run continues from that checkpoint."""
    import errno

    from wgsl_splat import atomic_io
    from wgsl_splat.app import train as train_cmd

    real_open_temp, real_configure = atomic_io._open_temp, train_cmd.configure

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def open_temp(tmp):
        f = real_open_temp(tmp)
        return FullDisk(f) if os.path.basename(tmp).startswith(".ckpt_000004.npz.") else f

    def configure(*args, **kwargs):
        cfg = real_configure(*args, **kwargs)
        cfg.checkpoint_every = 2
        return cfg

    monkeypatch.setattr(atomic_io, "_open_temp", open_temp)
    monkeypatch.setattr(train_cmd, "configure", configure)
    out = tmp_path / "run"
    res = train(out, "--iters", "4")
    ckpts = out / "checkpoints"
    assert_one_line_error(res, f"the disk is full: writing {ckpts / 'ckpt_000004.npz'} failed (No "
                               f"space left on device); the previous checkpoint "
                               f"{ckpts / 'ckpt_000002.npz'} is intact; free some space, "
                               f"continue with: wgsl_splat train --out {out} --resume latest "
                               f"--device cpu")
    assert os.listdir(ckpts) == ["ckpt_000002.npz"]     # no temp file, nothing half-written
    monkeypatch.setattr(atomic_io, "_open_temp", real_open_temp)   # space freed
    res = CliRunner().invoke(main, ["train", "--out", str(out), "--resume", "latest", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert sorted(os.listdir(ckpts)) == ["ckpt_000002.npz", "ckpt_000004.npz"]


def _resume_with_stored_config(tmp_path, edit):
    """A finished 2-step run whose checkpoint's stored configuration (dict) ``edit`` changed,
    resumed with ``--resume latest``: the CLI result."""
    out = tmp_path / "run"
    assert train(out, "--iters", "2").exit_code == 0
    ckpt = out / "checkpoints" / "ckpt_000002.npz"
    with np.load(ckpt) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    edit(meta["config"])
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(ckpt, **arrays)
    return CliRunner().invoke(main, ["train", "--out", str(out), "--resume", "latest",
                                     "--device", "cpu"])


def test_a_checkpoint_with_the_constant_rate_factor_resumes_with_its_own_rates(tmp_path):
    """Runs of 2026-11-28's fast preset stored ``optim.constant_lr_scale`` (since folded into
    ``lr_scale`` and the rates); their checkpoints resume, the rates the same bit for bit."""
    from wgsl_splat.training.config import TrainConfig

    d = TrainConfig().to_dict()
    d["optim"]["constant_lr_scale"], d["optim"]["lr_scale"] = 2.0, 0.5
    optim = TrainConfig.from_dict(d).optim
    base = TrainConfig().optim
    for group in LR_GROUPS:
        factor = 1.0 if group == "means" else 2.0
        assert optim.lr_for(group, 10) == 0.5 * factor * base.lr_for(group, 10), group

    res = _resume_with_stored_config(
        tmp_path, lambda c: c["optim"].update(constant_lr_scale=2.0))
    assert res.exit_code == 0, res.output
    assert "run is complete" in res.output


def test_a_checkpoint_with_a_cooldown_in_steps_resumes_with_the_same_steps_cooled():
    """Runs of 2026-11-29 stored ``optim.cooldown_steps`` (since a fraction of the run)."""
    from wgsl_splat.training.config import TrainConfig

    d = TrainConfig().to_dict()
    d["iters"], d["optim"]["cooldown_steps"] = 5_000, 200
    cfg = TrainConfig.from_dict(d)
    assert cfg.optim.with_scene(1.0, cfg.iters).cooldown_steps == 200
    d["optim"]["cooldown_steps"] = 0
    assert TrainConfig.from_dict(d).optim.cooldown_fraction == 0.0


def test_a_configuration_before_the_colour_map_centring_resumes_without_it():
    """Runs before 2026-11-29's optim.appearance_centring trained their maps free: they go on so."""
    from wgsl_splat.training.config import TrainConfig

    d = TrainConfig().to_dict()
    assert TrainConfig.from_dict(d).optim.appearance_centring == 1.0
    del d["optim"]["appearance_centring"]
    assert TrainConfig.from_dict(d).optim.appearance_centring == 0.0


def test_a_checkpoint_configuration_this_version_cannot_read_is_one_line(tmp_path):
    res = _resume_with_stored_config(
        tmp_path, lambda c: c["optim"].update(a_later_setting=1.0))
    assert_one_line_error(res, "configuration cannot be read by this version")
    assert "a_later_setting" in res.output
