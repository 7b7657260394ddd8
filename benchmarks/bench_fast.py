"""The fast training mode against ADC, side by side (docs/benchmarks.md, "Fast training mode").

Every run is the ``train`` command in a fresh process (``run``), with held-out evaluations at
several steps; at each one the runner records the training wall time and the process CPU time so
far, both *without* the evaluations (rendering the test views is not training), and the Gaussians.
``suite`` alternates the modes run by run (fast seed 0, ADC seed 0, fast seed 1, ...), so the
machine's drift affects both alike; ``table`` and ``plot`` read the results.

    python benchmarks/bench_fast.py suite --scene lego --seeds 0,1,2 --adc-seeds 0 --out runs/bench
    python benchmarks/bench_fast.py table runs/bench
    python benchmarks/bench_fast.py plot runs/bench --png docs/fast_mode.png

Scenes (3DGS's protocols): ``lego`` (-r 8, white background, the 200 test views), ``default``
(the embedded scene, the README's main command), ``fox`` and ``mouse`` (-r 4, every 8th view held
out). The data folder is ``$WGSL_SPLAT_DATA`` (default ``../shared/data``). ``plot`` needs
matplotlib (``pip install matplotlib``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("WGSL_SPLAT_DATA", ROOT.parent / "shared" / "data"))

SCENES = {
    "lego": lambda: [str(DATA / "lego"), "-r", "8", "--white-background"],
    "default": lambda: [],
    "fox": lambda: [str(DATA / "fox"), "-r", "4"],
    "mouse": lambda: [str(DATA / "mouse"), "-r", "4"],
}
MODES = {
    # ADC as the README's main command runs it: 3DGS's schedule to 7 000 steps
    "adc": ["--strategy", "adc", "--preset", "fast", "--eval-at", "500,1000,2000,3000,5000,7000"],
    "fast": ["--strategy", "fast", "--preset", "fast"],
}


def run_one(scene: str, mode: str, seed: int, out: Path, extra: list[str],
            settings: dict | None = None) -> dict:
    """One training run in this process, evaluations timed apart (see the module doc).
    ``settings``: configuration paths (``fast.start``) set on top of the preset, for options
    without a flag (ablations)."""
    import resource

    from wgsl_splat import options
    from wgsl_splat.app import config_cli
    from wgsl_splat.app.cli import main
    from wgsl_splat.training import trainer as trainer_mod

    if settings:
        make_config = config_cli.make_config

        def configured(*a, **kw):
            cfg = make_config(*a, **kw)
            for path, value in settings.items():
                options.set_path(cfg, path, value)
            return cfg

        config_cli.make_config = configured

    curve = []
    clock = {"eval_wall": 0.0, "eval_cpu": 0.0, "t0": None, "c0": None}

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    original_run, original_eval = trainer_mod.Trainer.run, trainer_mod.Trainer.evaluate

    def run(self, *a, **kw):
        clock["t0"], clock["c0"] = time.perf_counter(), cpu()
        summary = original_run(self, *a, **kw)
        clock["summary"] = summary
        clock["peak"] = self.step.counters.get("peak_bytes")
        return summary

    def evaluate(self, iteration):
        t, c = time.perf_counter(), cpu()
        result = original_eval(self, iteration)
        curve.append(dict(step=iteration, wall=t - clock["t0"] - clock["eval_wall"],
                          cpu=c - clock["c0"] - clock["eval_cpu"], psnr=result["mean"]["psnr"],
                          ssim=result["mean"]["ssim"], n=result["num_gaussians"]))
        clock["eval_wall"] += time.perf_counter() - t
        clock["eval_cpu"] += cpu() - c
        (out / "curve.json").write_text(json.dumps(curve))   # a run stopped early keeps its points
        return result

    trainer_mod.Trainer.run, trainer_mod.Trainer.evaluate = run, evaluate
    args = (["train"] + SCENES[scene]() + ["--eval", "--seed", str(seed), "--out", str(out),
                                            "--overwrite"] + MODES[mode] + extra)
    try:
        main(args, standalone_mode=False)
    finally:
        trainer_mod.Trainer.run, trainer_mod.Trainer.evaluate = original_run, original_eval
    summary = clock["summary"]
    timing = summary.get("timing", {})
    result = dict(scene=scene, mode=mode, seed=seed, args=args, settings=settings or {},
                  curve=curve,
                  steps=summary["iterations"], n=summary["num_gaussians"],
                  wall=curve[-1]["wall"] if curve else None, cpu=curve[-1]["cpu"] if curve else None,
                  peak_device_mib=(clock["peak"] or 0) / 2**20,
                  densify_s=timing.get("densify"), machine=machine(),
                  partial=bool(summary.get("interrupted")))   # stopped by a signal
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    return result


def machine() -> str:
    import platform

    try:
        from wgsl_splat.gpu.runtime import select_device

        adapter = select_device("gpu").name
    except Exception as exc:  # noqa: BLE001
        adapter = f"no adapter ({exc})"
    return f"{platform.node()}, {os.cpu_count()} CPUs, {adapter}"


def suite(args) -> None:
    """Alternate the modes run by run into ``out/<scene>_<mode>_s<seed>/``."""
    runs = []
    fast_seeds = [int(s) for s in args.seeds.split(",") if s]
    adc_seeds = [int(s) for s in args.adc_seeds.split(",") if s]
    for k in range(max(len(fast_seeds), len(adc_seeds))):
        if k < len(fast_seeds):
            runs.append(("fast", fast_seeds[k]))
        if k < len(adc_seeds):
            runs.append(("adc", adc_seeds[k]))
    for mode, seed in runs:
        out = Path(args.out) / f"{args.scene}_{mode}_s{seed}"
        if (out / "bench.json").exists() and not args.again:
            print(f"{out}: done already")
            continue
        cmd = [sys.executable, __file__, "run", "--scene", args.scene, "--mode", mode, "--seed",
               str(seed), "--out", str(out), "--"] + (args.fast_args if mode == "fast" else [])
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def load(folder: str) -> list[dict]:
    """Finished runs (bench.json), and runs stopped early by their curve so far (curve.json in a
    folder named ``<scene>_<mode>_s<seed>``, marked ``partial``)."""
    results = []
    for run_dir in sorted(p for p in Path(folder).iterdir() if p.is_dir()):
        if (run_dir / "bench.json").exists():
            results.append(json.loads((run_dir / "bench.json").read_text()))
        elif (run_dir / "curve.json").exists():
            scene, mode, seed = run_dir.name.rsplit("_", 2)
            curve = json.loads((run_dir / "curve.json").read_text())
            results.append({"scene": scene, "mode": mode, "seed": int(seed[1:]), "curve": curve,
                            "steps": curve[-1]["step"], "n": curve[-1]["n"],
                            "peak_device_mib": float("nan"), "partial": True})
    return results


def table(args) -> None:
    """Markdown rows: scene, mode, seed, steps, wall, CPU, N, PSNR/SSIM at the end, peak memory."""
    print("| scene | mode | seed | steps | wall s | CPU s | N | PSNR | SSIM | peak device MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in load(args.folder):
        last = r["curve"][-1]
        steps = f"{r['steps']} (stopped)" if r.get("partial") else r["steps"]
        print(f"| {r['scene']} | {r['mode']} | {r['seed']} | {steps} | {last['wall']:.0f} | "
              f"{last['cpu']:.0f} | {r['n']} | {last['psnr']:.2f} | {last['ssim']:.4f} | "
              f"{r['peak_device_mib']:.0f} |")
    print()
    for r in load(args.folder):
        points = ", ".join(f"{p['step']}: {p['wall']:.0f} s {p['psnr']:.2f} dB {p['n']}"
                           for p in r["curve"])
        print(f"- {r['scene']} {r['mode']} s{r['seed']}: {points}")


def flags_of(result: dict) -> str:
    """The flags a run added to its mode's, but the resolution (the scene's setting)."""
    run_args, mode_args = result.get("args") or [], MODES[result["mode"]]
    n = len(mode_args)
    ends = [i + n for i in range(len(run_args) - n + 1) if run_args[i:i + n] == mode_args]
    extra = run_args[ends[-1]:] if ends else []
    kept, skip = [], False
    for a in extra:
        if skip or a in ("-r", "--resolution"):
            skip = not skip
            continue
        kept.append(a)
    return " ".join(kept)


def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = load(args.folder)
    scenes = sorted({r["scene"] for r in results}, key=list(SCENES).index)
    fig, axes = plt.subplots(2, len(scenes), figsize=(4.2 * len(scenes), 6.4), squeeze=False)
    colours = {"fast": "tab:red", "adc": "tab:blue"}
    for col, scene in enumerate(scenes):
        for r in (r for r in results if r["scene"] == scene):
            x = [p[args.x] / 60 for p in r["curve"]]
            flags = flags_of(r)       # a variant: dashed, its flags in the label
            for row, key in enumerate(("psnr", "ssim")):
                ax = axes[row][col]
                ax.plot(x, [p[key] for p in r["curve"]], "o--" if flags else "o-", ms=3, lw=1.2,
                        color=colours[r["mode"]], alpha=0.85,
                        label=f"{r['mode']}{' ' + flags if flags else ''} (seed {r['seed']}, "
                              f"N {r['n'] // 1000} k"
                              + (", stopped early)" if r.get("partial") else ")"))
        for row, key in enumerate(("held-out PSNR (dB)", "held-out SSIM")):
            ax = axes[row][col]
            ax.set_title(f"{scene}" if row == 0 else "")
            ax.set_xlabel(f"training {'wall' if args.x == 'wall' else 'CPU'} time (min, "
                          "evaluations excluded)")
            ax.set_ylabel(key)
            ax.grid(alpha=0.3)
            if row == 0:
                ax.legend(fontsize=7)
    fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="one run in this process")
    r.add_argument("--scene", choices=SCENES, required=True)
    r.add_argument("--mode", choices=MODES, required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", required=True)
    r.add_argument("--set", action="append", default=[], metavar="PATH=JSON",
                   help="a configuration value without a flag, e.g. fast.start=300")
    r.add_argument("extra", nargs="*", help="more train flags (after --)")
    s = sub.add_parser("suite", help="alternate the modes, one process per run")
    s.add_argument("--scene", choices=SCENES, required=True)
    s.add_argument("--seeds", default="0,1,2", help="the fast mode's seeds")
    s.add_argument("--adc-seeds", default="0", help="ADC's seeds")
    s.add_argument("--out", required=True)
    s.add_argument("--again", action="store_true", help="redo finished runs")
    s.add_argument("fast_args", nargs="*", help="more train flags for the fast runs (after --)")
    t = sub.add_parser("table", help="markdown table of a suite's results")
    t.add_argument("folder")
    g = sub.add_parser("plot", help="PSNR/SSIM over wall time, both modes, one column per scene")
    g.add_argument("folder")
    g.add_argument("--png", required=True)
    g.add_argument("--title", default="held-out quality over training time")
    g.add_argument("--x", choices=("wall", "cpu"), default="wall",
                   help="wall time, or the process's CPU time (steadier on a shared machine)")
    args = p.parse_args()
    if args.cmd == "run":
        settings = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
        result = run_one(args.scene, args.mode, args.seed, Path(args.out), args.extra, settings)
        last = result["curve"][-1]
        print(f"{args.scene} {args.mode} seed {args.seed}: {result['steps']} steps, "
              f"{last['wall']:.0f} s wall, {last['cpu']:.0f} s CPU, N {result['n']}, "
              f"{last['psnr']:.2f} dB / {last['ssim']:.4f}")
    else:
        {"suite": suite, "table": table, "plot": plot}[args.cmd](args)


if __name__ == "__main__":
    main()
