"""Data-parallel training (wgsl_splat.training.parallel): two devices on one adapter in one process, and
two MPI ranks on localhost, against the single-device batch."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_batch import batch_problem
from test_gpu_step import fresh_seed
from test_trainer import run, tiny_config

from wgsl_splat.app.cli import main
from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.data.ply import load_ply
from wgsl_splat.gpu.runtime import (
    device_indices,
    list_adapters,
    open_devices,
    several_devices_refused,
)
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.strategy.adc import ADC_STATS
from wgsl_splat.training.parallel import LocalReducer, ReplicatedStep, parameter_hash


@pytest.fixture(scope="module")
def two_devices():
    """Two devices on the first adapter (lavapipe in CI); skipped, with the adapter's reason, on
    one that cannot run two (wgpu's OpenGL backend)."""
    index = device_indices("all")[0]
    why = several_devices_refused(list_adapters()[index])
    if why:
        pytest.skip(why)
    contexts = open_devices([index] * 2)
    yield contexts
    for c in contexts:
        c.close()


class Recording(LocalReducer):
    def reduce(self, sums, maxima):
        self.sums, self.maxima = sums.copy(), maxima.copy()
        return sums, maxima


def test_two_devices_give_the_gradient_of_the_batch(gpu_ctx, two_devices):
    seed = fresh_seed()
    model, views = batch_problem(seed, views=4)
    config = OptimConfig().with_scene(1.0, 100).for_batch(4)
    single = GpuTrainStep(gpu_ctx, HostArrays.fresh(model.copy(), ADC_STATS), config)
    single.accumulate(views, 1)
    want_sums, want_max = single.read_reduction()
    rec = Recording()
    pair = ReplicatedStep([GpuTrainStep(c, HostArrays.fresh(model.copy(), ADC_STATS), config)
                           for c in two_devices], rec)
    assert [v.view_id for v in pair.views_of(views, 1)] == [1, 3]
    pair.step_batch(views, 1)
    scale = np.abs(want_sums).max()
    assert np.abs(rec.sums - want_sums).max() <= 1e-4 * scale, f"seed {seed}"
    assert np.array_equal(rec.maxima[:-1], want_max) and rec.maxima[-1] == 0, f"seed {seed}"
    assert parameter_hash(pair.replicas[0]) == parameter_hash(pair.replicas[1])
    assert "replicas agree at step 1" in pair.check_replicas()
    # the update: the single device's, within float32 noise
    single.finish(4)
    a, b = single.get_model(), pair.get_model()
    for name, x in a.arrays().items():
        close = np.isclose(x, b.arrays()[name], rtol=1e-5, atol=1e-6)
        assert close.mean() > 0.99, f"seed {seed}: {name} differs in {np.sum(~close)} entries"


def test_training_on_two_devices_matches_one(tmp_path, gpu_ctx, two_devices):
    """Same model after N steps with densification (float32 noise), replicas bit-identical."""
    cfg = tiny_config(16)
    cfg.batch_size = 2

    def one(arrays, spec):
        return GpuTrainStep(gpu_ctx, arrays, spec=spec)

    def two(arrays, spec):
        return ReplicatedStep([GpuTrainStep(c, arrays, spec=spec)
                               for c in two_devices], check_every=1, start_step=arrays.adam.step)

    t1, s1, _ = run(tmp_path / "one", cfg, factory=one)
    t2, s2, _ = run(tmp_path / "two", cfg, factory=two)
    assert s2["iterations"] == 16 and s2["num_gaussians"] == s1["num_gaussians"]
    m1, m2 = t1.step.get_model(), t2.step.get_model()
    assert np.median(np.abs(m1.means - m2.means)) < 1e-4
    log = (tmp_path / "two" / "train.log").read_text()
    assert "replicas agree at step 16" in log and "all-reduce" in log


def test_the_replicated_state_runs_each_operation_on_every_replica():
    """The contract's operations and a strategy's own (3DGS-MCMC's relocate, not in the contract)
    run on every replica and must agree; reads ask the first replica."""
    from types import SimpleNamespace

    from wgsl_splat.model import GaussianModel
    from wgsl_splat.reference.state import HostState
    from wgsl_splat.training.parallel import ReplicaDivergence, ReplicatedState

    model = GaussianModel.random(60, np.random.default_rng(5), sh_degree=0, dtype=np.float32)
    model.opacity_logits[::3] = -9.0                       # dead: relocated
    replicas = [SimpleNamespace(state=HostState(HostArrays.fresh(model, ADC_STATS)))
                for _ in range(2)]
    state = ReplicatedState(replicas)
    assert state.relocate(0.005, 11) == 20 and state.sample_add(7, 0.005, 12) == 7
    state.reset_opacity(0.5)
    assert state.n == 67 and [r.state.rows_version for r in replicas] == [state.rows_version] * 2
    np.testing.assert_array_equal(replicas[0].state.arrays.model.means,
                                  replicas[1].state.arrays.model.means)
    assert state.download().model.means is not replicas[1].state.arrays.model.means
    replicas[1].state.arrays.model.opacity_logits[:5] = -9.0  # dead on replica 1 only
    with pytest.raises(ReplicaDivergence, match="replicas disagree on relocate"):
        state.relocate(0.005, 13)


@pytest.mark.gpu
def test_device_errors_are_one_line(tmp_path):
    r = CliRunner().invoke(main, ["train", "--devices", "7", "--batch-size", "2", "--preset", "smoke",
                                  "--out", str(tmp_path / "a")])
    assert r.exit_code != 0 and "--devices 7: no adapter 7" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["train", "--devices", "0,0", "--preset", "smoke",
                                  "--out", str(tmp_path / "b")])
    assert r.exit_code != 0 and "--batch-size 1 is smaller than the 2 devices" in r.output


def _cli(*args, env=None, mpi=0):
    cmd = [sys.executable, "-m", "wgsl_splat", "train", *args]
    if mpi:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
        cmd = [mpiexec, "-n", str(mpi)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def test_distributed_without_mpi_is_one_line(tmp_path):
    fake = tmp_path / "nompi" / "mpi4py"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mpi4py')\n")
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    r = _cli("--distributed", "--preset", "smoke", "--out", str(tmp_path / "o"), env=env)
    assert r.returncode == 1 and "--distributed needs MPI for Python" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.gpu
def test_mpirun_two_ranks_equal_the_one_process_run(tmp_path):
    """mpirun -n 2 on localhost: both ranks hold the same model (hash compared), equal to two
    devices in one process (no densification in these 10 steps: equal to float32 noise)."""
    pytest.importorskip("mpi4py", reason="the dev extra installs mpi4py and mpich")
    common = ["--preset", "smoke", "--iters", "10", "--batch-size", "2", "--device", "gpu"]
    r = _cli(*common, "--distributed", "--out", str(tmp_path / "mpi"), mpi=2)
    assert r.returncode == 0, r.stderr[-2000:]
    r1 = _cli(*common, "--devices", "0,0", "--out", str(tmp_path / "local"))
    assert r1.returncode == 0, r1.stderr[-2000:]
    log = (tmp_path / "mpi" / "train.log").read_text()
    assert "replicas agree at step 10" in log and "on all 2" in log
    a = load_ply(tmp_path / "mpi" / "point_cloud" / "iteration_10" / "point_cloud.ply")
    b = load_ply(tmp_path / "local" / "point_cloud" / "iteration_10" / "point_cloud.ply")
    assert len(a) == len(b)
    # float32 atomics make the raster backward's sums order-dependent; Adam's first steps (≈ lr·sign)
    # amplify that where a gradient is ~0: two one-process runs differ by as much (measured: means
    # 5e-6, SH 5e-5, opacity 3e-4, log-scales 1.8e-3, quaternions 1.5e-2).
    tol = {"means": 1e-4, "sh": 1e-3, "opacity_logits": 1e-2, "log_scales": 3e-2, "quats": 0.1}
    for name, x in a.arrays().items():
        np.testing.assert_allclose(x, b.arrays()[name], atol=tol[name], err_msg=name)
    assert not list(Path(tmp_path).glob("**/wgsl_splat_rank*"))


RANK_EXIT = """\
import os, sys
from wgsl_splat.app.cli import main
try:
    main(sys.argv[1:], prog_name="wgsl_splat")
except SystemExit as exc:   # each rank's own exit status, which mpirun folds into one
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    with open(os.path.join(sys.argv[sys.argv.index("--out") + 1] + ".rc", os.environ["PMI_RANK"]), "w") as f:
        f.write(str(code))
    raise
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_mpirun_saves_once_and_resumes(tmp_path, sig):
    """SIGINT/SIGTERM to mpirun (Ctrl-C, scancel, a time limit): every rank ends with 128 + the
    signal, rank 0 writes the checkpoint and PLY of the step the ranks agreed on, and the printed
    command continues the run under mpirun."""
    pytest.importorskip("mpi4py", reason="the dev extra installs mpi4py and mpich")
    wrapper = tmp_path / "rank.py"
    wrapper.write_text(RANK_EXIT)
    out = tmp_path / "mpi"
    (tmp_path / "mpi.rc").mkdir()
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    args = ["train", "--preset", "smoke", "--iters", "20", "-r", "8", "--batch-size", "2",
            "--device", "cpu", "--distributed", "--out", str(out)]
    scratch = tmp_path / "scratch"           # rank 1 logs into a temp folder: made here
    scratch.mkdir()
    proc = subprocess.Popen([mpiexec, "-n", "2", sys.executable, str(wrapper), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        deadline = time.time() + 120

        def training(log):
            return "training steps" in (log.read_text() if log.exists() else "")

        # both ranks in their loops (the case: interrupted mid-run)
        while not (training(out / "train.log") and any(map(training, scratch.glob("*/train.log")))):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    code = 128 + int(sig)
    assert proc.returncode == code, output
    ranks = {p.name: int(p.read_text()) for p in (tmp_path / "mpi.rc").iterdir()}
    assert ranks == {"0": code, "1": code}, (ranks, output)
    assert "Traceback" not in output and "Error" not in output, output
    step = int(output.split(f"Interrupted by {sig.name} at step ")[1].split(":")[0])
    assert step < 20
    assert os.listdir(out / "checkpoints") == [f"ckpt_{step:06d}.npz"]
    assert os.listdir(out / "point_cloud") == [f"iteration_{step}"]
    assert output.count(f"Interrupted by {sig.name}") == 1
    again = output.split("Continue with: ")[1].split("\n")[0].split()
    assert again[:3] == ["mpirun", "-n", "2"] and "--distributed" in again
    assert again[again.index("--out") + 1] == str(out) and "--resume" in again
    assert again[again.index("--device") + 1] == "cpu"
    if sig != signal.SIGTERM:    # one resume is enough: it does not depend on the signal
        return
    r = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "wgsl_splat",
                        *again[again.index("train"):]], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    log = (out / "train.log").read_text()
    assert f"at step {step} with" in log and f"done: {20 - step} steps ({step + 1}..20)" in log
    assert (out / "point_cloud" / "iteration_20" / "point_cloud.ply").is_file()
    assert "replicas agree at step" in log


def test_two_devices_on_an_adapter_that_cannot_are_one_line(tmp_path):
    """wgpu's OpenGL adapter (what wgpu picks without a Vulkan driver) aborted the process in
    queue.submit with two devices: refused in one line instead."""
    gl = [i for i, a in enumerate(list_adapters()) if a.info.get("backend_type") == "OpenGL"]
    if not gl:
        pytest.skip("no OpenGL adapter here (Mesa's llvmpipe gives one beside lavapipe)")
    r = _cli("--devices", f"{gl[0]},{gl[0]}", "--batch-size", "2", "--preset", "smoke", "--iters",
             "2", "-r", "8", "--out", str(tmp_path / "gl"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert (f"--devices {gl[0]},{gl[0]}: " in r.stderr and "OpenGL backend cannot drive several "
            "devices in one process" in r.stderr), r.stderr
    assert not (tmp_path / "gl" / "train.log").exists()
