"""The GPU suite of issue 23, in one call: the workloads whose figures only a GPU can give.

    python benchmarks/gpu_suite.py --out gpu_suite.json [--data-dir ../shared/data] [--update-docs]

Workloads (each a child process, each with a wall-clock limit; at the limit the run gets SIGTERM,
saves, and what it reached is reported with ``interrupted``), about 9 minutes in all:

- ``checks``: the GPU-vs-NumPy gradient and emission tests on the device, in both layouts
  (``Layout.of``'s kinds) at the device's own subgroup width, with every read-write buffer's
  sentinel tail checked after each step (``WGSL_SPLAT_SENTINELS=on``): passed / failed counts;
- ``lego``: NeRF-synthetic lego at full resolution (800×800), 30 000 steps, white background,
  the 200 test views evaluated at 7 000 and 30 000 (PSNR, SSIM, LPIPS when the package is there);
- ``lego_fast``: the same scene in the fast mode (``--preset fast``), evaluated at its end;
- ``fox``: fox at ``-r 1`` (1080×1920), ``--strategy adc --preset fast`` (7 000 steps): N, peak
  memory, the densification share of the wall time;
- ``step_1m``: ``bench`` at 1 M Gaussians, 1920×1080 (step time, stages and their shares next to
  msplat's profile on an M4, peak memory per buffer);
- ``step_3m``, ``emit_4k``, ``emit_8k``: ``bench`` at 3 M Gaussians at 1920×1080, 3840×2160 and
  7680×4320: emission's threads and its time per intersection at each size (issue 33: at 4K no
  more than 1.3× that at 1080p);
- ``observe``: ``benchmarks/observe_cost.py`` at 1 M Gaussians, 1920×1080: a densification
  round's 10 observed views and 10 validation views, with the images read back to the host (as
  before 2026-11-28) and on the device, milliseconds and bytes read back per round;
- ``rank``: ``benchmarks/rank_cost.py`` at 1 M Gaussians: a capped fast-mode round with its rows
  ranked on the device (``rank.wgsl``) and on the host (as before 2026-11-29).

Per training workload: N, wall time, it/s, peak device memory, the densification share, the held-out
metrics per evaluated step. One JSON (``--out``) holds everything; the Markdown rows for
docs/benchmarks.md are printed, written beside the JSON (``.md``) and, with ``--update-docs``,
replace the block between the ``gpu_suite`` markers of docs/benchmarks.md.

``--dry-run``: the same workloads at a tiny size (``-r 16``, a few dozen steps, bench at 2 000
Gaussians) — what the test suite runs on lavapipe to keep this script working. Without the
scenes (``--data-dir``) the training workloads run on the embedded default scene.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- gpu_suite:begin -->", "<!-- gpu_suite:end -->"
#: the issue's targets, shown beside the figures
TARGETS = {"lego_psnr_30k": 35.9, "densify_share_1m": 0.03, "step_1m_ms": 15.0}


@dataclass
class Train:
    name: str
    scene: str                       # folder under --data-dir
    args: list[str]
    limit_s: float
    eval_at: tuple[int, ...] = ()
    dry_args: list[str] = field(default_factory=list)


#: a dry run's training: 5 000 random points (the smoke preset's), 20 steps
DRY = ["--preset", "smoke", "--iters", "20"]
WORKLOADS = [
    Train("lego", "lego", ["--white-background", "--eval", "--iters", "30000"], 160,
          (7000, 30000), ["--white-background", "--eval", "-r", "16", *DRY]),
    # 5 000 steps took 189 s on an H100 (2026-11-27: the budget rule grew 1.3 M Gaussians)
    Train("lego_fast", "lego", ["--white-background", "--eval", "--preset", "fast"], 210,
          (1000, 3000, 5000), ["--white-background", "--eval", "-r", "16", *DRY]),
    Train("fox", "fox", ["--eval", "--strategy", "adc", "--preset", "fast"], 80, (7000,),
          ["--eval", "-r", "16", *DRY]),
]
#: bench configurations: (name, [N, width, height], limit in seconds)
#: (an H100, 2026-11-27: the 4K and 8K runs took 49 and 99 s, most of it building 3 M random
#: Gaussians and the first dispatches, not the 13 steps)
STEPS = [("step_1m", (1_000_000, 1920, 1080), 40), ("step_3m", (3_000_000, 1920, 1080), 50),
         ("emit_4k", (3_000_000, 3840, 2160), 70), ("emit_8k", (3_000_000, 7680, 4320), 130)]
DRY_STEP = ["-n", "2000", "--width", "96", "--height", "54"]
#: a densification round's parts, each way alternated by its script: name -> (script, its
#: arguments, the dry run's, limit in seconds, what the table's first column says)
ROUNDS = {
    "observe": ("observe_cost.py", ["-n", "1000000", "--size", "1920x1080"],
                ["-n", "2000", "--size", "96x54", "--views", "2", "--pairs", "1"], 60,
                "{views} views, N {n}, {size}"),
    "rank": ("rank_cost.py", ["-n", "1000000"], ["-n", "3000", "--pairs", "1"], 60,
             "a capped round, N {n}, room {room}"),
}
#: msplat's stage shares of a step on an Apple M4 (the field's profile on Apple): the raster
#: backward and the forward render
MSPLAT_M4 = {"raster backward": 0.54, "forward": 0.29}
FORWARD_STAGES = ("project", "depth sort", "emit+scan", "rasterize")
#: the gradient and emission checks the suite runs on the device (pytest node ids)
CHECKS = ["tests/test_gpu_step.py", "tests/test_gpu_emission.py", "tests/test_gpu_sentinels.py",
          "tests/test_gpu_degenerate.py", "tests/test_subgroup_widths.py"]
DRY_CHECKS = ["tests/test_gpu_emission.py"]
CHECKS_LIMIT_S = 45
DRY_EVAL = (20,)                 # one evaluation: 200 test views take 5-12 s on lavapipe


def data_dir(given: str | None) -> Path:
    for d in (given, os.environ.get("WGSL_SPLAT_DATA"), ROOT.parent / "shared" / "data"):
        if d and Path(d).is_dir():
            return Path(d)
    return Path(given or "data")


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


GRACE_S = 25       # after SIGTERM: a run finishes its step and saves its checkpoint and PLY


def run_limited(cmd: list[str], limit_s: float, log: Path) -> tuple[int, float, bool]:
    """Run ``cmd`` with its output in ``log``; SIGTERM at ``limit_s`` (a training run saves and
    stops at the end of its step), SIGKILL :data:`GRACE_S` later. Returns (exit code, seconds,
    timed out)."""
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=child_env(),
                                cwd=ROOT)
        timed_out = False
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return proc.returncode, time.perf_counter() - t0, timed_out


DONE = re.compile(r"done: (\d+) steps.* in ([\d.]+)s \(([\d.]+) it/s\), N (\d+); time: (.*)$")
PEAK = re.compile(r"peak device memory (\d+) MiB")
ADAPTER = re.compile(r" on gpu \((.*)\) -> ")


def train_figures(out_dir: Path) -> dict:
    """What a finished (or interrupted) run tells: from its train.log and metrics.json."""
    fig: dict = {"steps": None, "seconds": None, "it_per_s": None, "n": None,
                 "peak_mib": None, "densify_share": None, "eval": {}}
    log = out_dir / "train.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    peaks = [int(m) for m in PEAK.findall(text)]
    fig["peak_mib"] = max(peaks) if peaks else None
    for line in text.splitlines():
        m = DONE.search(line)
        if m:
            fig.update(steps=int(m[1]), seconds=float(m[2]), it_per_s=float(m[3]), n=int(m[4]))
            shares = dict(re.findall(r"([a-z+() ]+?) [\d.]+s \(([\d.]+)%\)", m[5]))
            shares = {k.strip(): float(v) / 100 for k, v in shares.items()}
            fig["time_shares"] = shares
            fig["densify_share"] = shares.get("densify")
    metrics = out_dir / "metrics.json"
    if metrics.exists():
        for key, r in json.loads(metrics.read_text()).items():
            m = re.fullmatch(r"iteration_(\d+)", key)
            if m and isinstance(r, dict) and "mean" in r:
                fig["eval"][int(m[1])] = {"views": r.get("views"), "n": r.get("num_gaussians"),
                                          **{k: r["mean"].get(k) for k in ("psnr", "ssim", "lpips")}}
    return fig


def run_train(w: Train, args, work: Path, python: str, limit: float) -> dict:
    scene = data_dir(args.data_dir) / w.scene
    if not scene.is_dir() and not args.dry_run:   # its figures would carry the scene's name
        print(f"[{w.name}] skipped: no {scene} (--data-dir)", flush=True)
        return {"kind": "skipped", "ok": False, "exit_code": None, "interrupted": False,
                "why": f"no {scene}"}
    data = str(scene) if scene.is_dir() else "default"
    extra = w.dry_args if args.dry_run else w.args
    if data == "default":      # the scene's own flags do not apply to the embedded scene
        extra = [a for a in extra if a != "--white-background"]
    evals = DRY_EVAL if args.dry_run else w.eval_at
    out = work / w.name
    cmd = [python, "-m", "wgsl_splat", "train", data, "--device", "gpu", "--out", str(out),
           "--overwrite", *extra, "--eval-at", ",".join(map(str, evals))]
    if args.adapter:
        cmd += ["--adapter", args.adapter]
    print(f"[{w.name}] {' '.join(cmd[1:])} (limit {limit:.0f} s)", flush=True)
    rc, wall, timed_out = run_limited(cmd, limit, work / f"{w.name}.log")
    fig = train_figures(out)
    text = (work / f"{w.name}.log").read_text(errors="replace")
    adapter = ADAPTER.search(text)
    ok = rc == 0 or (timed_out and fig["steps"] is not None)
    result = {"kind": "train", "data": data, "command": cmd[1:], "exit_code": rc, "ok": ok,
              "wall_s": wall, "interrupted": timed_out, "adapter": adapter and adapter[1], **fig}
    if not ok:
        result["tail"] = text[-2000:]
    print(f"[{w.name}] {summary_line(w.name, result)}", flush=True)
    return result


def run_checks(limit: float, args, work: Path, python: str) -> dict:
    """The checks on the device: pytest in a child process, the sentinel mode on; its counts."""
    log = work / "checks.log"
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
           *(DRY_CHECKS if args.dry_run else CHECKS)]
    print(f"[checks] {' '.join(cmd[1:])} (limit {limit:.0f} s)", flush=True)
    os.environ["WGSL_SPLAT_SENTINELS"] = "on"
    try:
        rc, wall, timed_out = run_limited(cmd, limit, log)
    finally:
        del os.environ["WGSL_SPLAT_SENTINELS"]
    text = log.read_text(errors="replace")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error)", text)}
    result = {"kind": "checks", "command": cmd[1:], "exit_code": rc, "ok": rc == 0,
              "wall_s": wall, "interrupted": timed_out, "passed": counts.get("passed", 0),
              "failed": counts.get("failed", 0) + counts.get("error", 0),
              "skipped": counts.get("skipped", 0)}
    if not result["ok"]:
        result["tail"] = text[-3000:]
    print(f"[checks] {summary_line('checks', result)}", flush=True)
    return result


def run_step(name: str, size3: tuple, limit: float, args, work: Path, python: str) -> dict:
    n, width, height = size3
    size = DRY_STEP if args.dry_run else ["-n", str(n), "--width", str(width),
                                          "--height", str(height)]
    steps = ["--steps", "2", "--warmup", "1"] if args.dry_run else ["--steps", "10", "--warmup", "3"]
    out = work / f"{name}.json"
    cmd = [python, "-m", "wgsl_splat", "bench", *size, "--device", "gpu", *steps, "--json", str(out)]
    if args.adapter:
        cmd += ["--adapter", args.adapter]
    print(f"[{name}] {' '.join(cmd[1:])} (limit {limit:.0f} s)", flush=True)
    rc, wall, timed_out = run_limited(cmd, limit, work / f"{name}.log")
    result = {"kind": "step", "command": cmd[1:], "exit_code": rc, "ok": rc == 0 and out.exists(),
              "wall_s": wall, "interrupted": timed_out}
    if result["ok"]:
        report = json.loads(out.read_text())
        r = report["results"][0]
        g = r["gpu"]
        result.update(adapter=report["machine"].get("adapter"), n=r["n"],
                      size=f"{r['width']}x{r['height']}", step_ms=g["step"]["median_ms"],
                      stages=g.get("stages"), peak_mib=g["peak_bytes"] / 2**20,
                      bytes_per_gaussian=g["bytes_per_gaussian"], memory=g.get("memory"),
                      intersections=g.get("intersections"),
                      emission_threads=g.get("emission_threads"),
                      layout=g.get("layout_choices"))
    else:
        result["tail"] = (work / f"{name}.log").read_text(errors="replace")[-2000:]
    print(f"[{name}] {summary_line(name, result)}", flush=True)
    return result


def run_round(name: str, limit: float, args, work: Path, python: str) -> dict:
    """One of ROUNDS: its script's JSON (medians, bytes and blocking reads per way) and the
    first column of its table."""
    script, full, dry, _, label = ROUNDS[name]
    out = work / f"{name}.json"
    cmd = [python, str(ROOT / "benchmarks" / script), *(dry if args.dry_run else full),
           "--json", str(out)]
    print(f"[{name}] {' '.join(cmd[1:])} (limit {limit:.0f} s)", flush=True)
    rc, wall, timed_out = run_limited(cmd, limit, work / f"{name}.log")
    result = {"kind": "round", "script": script, "command": cmd[1:], "exit_code": rc,
              "ok": rc == 0 and out.exists(), "wall_s": wall, "interrupted": timed_out}
    if result["ok"]:
        report = json.loads(out.read_text())
        if "size" in report:
            report["size"] = "x".join(map(str, report["size"]))
        result.update({k: v for k, v in report.items() if k != "median_ms"},
                      median_ms=report["median_ms"], label=label.format(**report))
    else:
        result["tail"] = (work / f"{name}.log").read_text(errors="replace")[-2000:]
    print(f"[{name}] {summary_line(name, result)}", flush=True)
    return result


def _f(x, fmt: str, none: str = "—") -> str:
    return none if x is None else format(x, fmt)


def summary_line(name: str, r: dict) -> str:
    if r["kind"] == "checks":
        return (f"{r['passed']} passed, {r['failed']} failed, {r['skipped']} skipped in "
                f"{r['wall_s']:.0f} s{' (interrupted at the limit)' if r['interrupted'] else ''}")
    if not r["ok"]:
        return f"FAILED (exit {r['exit_code']}{', timed out' if r['interrupted'] else ''})"
    if r["kind"] == "step":
        return (f"N {r['n']} {r['size']}: step {r['step_ms']:.2f} ms, peak {r['peak_mib']:.0f} MiB "
                f"({r['bytes_per_gaussian']:.0f} B/Gaussian)")
    if r["kind"] == "round":
        return "; ".join(f"{k} {v:.1f} ms" for k, v in r["median_ms"].items())
    evals = ", ".join(f"@{k}: {_f(e['psnr'], '.2f')} dB" for k, e in sorted(r["eval"].items()))
    return (f"{r['steps']} steps in {r['seconds']:.0f} s ({r['it_per_s']:.1f} it/s), N {r['n']}, "
            f"peak {r['peak_mib']} MiB, densify {_f(r['densify_share'], '.1%')}"
            f"{'; ' + evals if evals else ''}{' (interrupted at the limit)' if r['interrupted'] else ''}")


def markdown_rows(report: dict) -> str:
    """The rows of docs/benchmarks.md: one table for the training runs, one for the step."""
    m = report["machine"]
    lines = [(f"GPU suite ({'dry run, ' if report['dry_run'] else ''}{m.get('adapter') or '?'}, "
              f"{report['date']}; `python benchmarks/gpu_suite.py`):"), "",
             ("| run | steps | N | wall s (without eval+io) | it/s | peak MiB | densify share | "
              "held-out PSNR / SSIM / LPIPS |"), "|---|---|---|---|---|---|---|---|"]
    steps, rounds = [], []
    for name, r in report["results"].items():
        if r["kind"] == "checks":
            steps_checks = (f"{r['passed']} passed, {r['failed']} failed in {r['wall_s']:.0f} s"
                            f"{' (limit)' if r['interrupted'] else ''}")
            lines.insert(1, f"\nChecks on the device (both layouts, sentinel tails): "
                            f"{steps_checks}.")
            continue
        if r["kind"] == "skipped":
            lines.append(f"| {name} | skipped ({r['why']}) | | | | | | |")
            continue
        if r["kind"] == "step":
            steps.append((name, r))
            continue
        if r["kind"] == "round":
            rounds.append(r)
            continue
        if not r["ok"]:
            lines.append(f"| {name} | failed (exit {r['exit_code']}) | | | | | | |")
            continue
        evals = "; ".join(f"{k}: {_f(e['psnr'], '.2f')} / {_f(e['ssim'], '.4f')} / "
                          f"{_f(e['lpips'], '.3f')}" for k, e in sorted(r["eval"].items()))
        steps_s = f"{r['steps']}{' (limit)' if r['interrupted'] else ''}"
        evals_s = r.get("time_shares", {}).get("eval+io")
        wall = f"{r['seconds']:.0f}" + (f" ({r['seconds'] * (1 - evals_s):.0f})" if evals_s else "")
        lines.append(f"| {name} | {steps_s} | {r['n']} | {wall} | "
                     f"{r['it_per_s']:.1f} | {r['peak_mib']} | {_f(r['densify_share'], '.1%')} | "
                     f"{evals or '—'} |")
    if steps:
        lines += ["", ("| step | N | size | step ms | peak MiB | B/Gaussian | emission ms | "
                       "threads | ns per intersection |"), "|---|---|---|---|---|---|---|---|---|"]
        for name, r in steps:
            if r["ok"]:
                emit = (r.get("stages") or {}).get("emit+scan")
                per = (1e6 * emit / r["intersections"] if emit and r.get("intersections")
                       else None)
                lines.append(f"| {name} | {r['n']} | {r['size']} | {r['step_ms']:.2f} | "
                             f"{r['peak_mib']:.0f} | {r['bytes_per_gaussian']:.0f} | "
                             f"{_f(emit, '.2f')} | {_f(r.get('emission_threads'), 'd')} | "
                             f"{_f(per, '.2f')} |")
            else:
                lines.append(f"| {name} | failed (exit {r['exit_code']}) | | | | | | | |")
        lines += stage_share_rows(dict(steps))
    for r in rounds:
        lines += ["", f"A densification round's host traffic (`benchmarks/{r['script']}`):"]
        if r["ok"]:
            lines += ["", f"| {r['label']} | ms per round | bytes read back | blocking reads |",
                      "|---|---|---|---|"]
            lines += [f"| {k} | {v:.1f} | {r['readback_bytes'][k]:,} | {r['readbacks'][k]} |"
                      for k, v in r["median_ms"].items()]
        else:
            lines += ["", f"failed (exit {r['exit_code']})"]
    lines += ["", ("Targets (issue 23): lego 30 k ≥ 35.9 dB; densification ≤ 3 % of wall time at "
                   "≥ 1 M Gaussians; the step at 1 M Gaussians / 1080p ≤ 15 ms on an H100.")]
    return "\n".join(lines)


def stage_share_rows(steps: dict) -> list[str]:
    """The 1 M / 1080p step's stage shares beside msplat's M4 profile."""
    r = steps.get("step_1m")
    stages = (r or {}).get("stages") or {}
    total = sum(stages.values())
    if not r or not r.get("ok") or not total:
        return []
    rows = ["", "| stage of the 1 M / 1080p step | ms | share | msplat on an M4 |", "|---|---|---|---|"]
    for k, v in stages.items():
        rows.append(f"| {k} | {v:.2f} | {v / total:.0%} | "
                    f"{_f(MSPLAT_M4.get(k), '.0%', '')} |")
    forward = sum(v for k, v in stages.items() if k in FORWARD_STAGES)
    rows.append(f"| forward ({', '.join(FORWARD_STAGES)}) | {forward:.2f} | "
                f"{forward / total:.0%} | {MSPLAT_M4['forward']:.0%} |")
    return rows


def update_docs(path: Path, rows: str) -> None:
    """Replace the block between the gpu_suite markers of ``path`` with ``rows``."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{rows}\n{END}{tail}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the JSON to write (the Markdown rows beside it)")
    p.add_argument("--data-dir", help="where lego/ and fox/ are ($WGSL_SPLAT_DATA, ../shared/data)")
    p.add_argument("--work", help="run folders and logs (default: a temporary folder, removed)")
    p.add_argument("--only", help="comma-separated workloads: checks,lego,lego_fast,fox,step_1m,"
                                  "step_3m,emit_4k,emit_8k,observe,rank")
    p.add_argument("--adapter", help="the GPU adapter whose name contains this")
    p.add_argument("--limit-scale", type=float, default=1.0,
                   help="multiply every workload's wall-clock limit")
    p.add_argument("--budget-s", type=float, default=580,
                   help="the whole suite's wall-clock budget: a workload's limit is cut to what is "
                        "left of it, one with under 20 s left is skipped")
    p.add_argument("--dry-run", action="store_true", help="tiny sizes (the test on lavapipe)")
    p.add_argument("--update-docs", nargs="?", const=str(DOCS), default=None, metavar="MD",
                   help="replace the gpu_suite block of docs/benchmarks.md (or MD) with the rows")
    args = p.parse_args(argv)
    names = ["checks"] + [w.name for w in WORKLOADS] + [s[0] for s in STEPS] + list(ROUNDS)
    only = [s.strip() for s in args.only.split(",")] if args.only else names
    unknown = set(only) - set(names)
    if unknown:
        p.error(f"unknown workloads {sorted(unknown)}; known: {','.join(names)}")
    tmp = None if args.work else tempfile.TemporaryDirectory(prefix="gpu_suite_")
    work = Path(args.work or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    report = {"dry_run": args.dry_run, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": {}, "targets": TARGETS, "results": {}}
    t0 = time.perf_counter()

    def limit(own_s: float) -> float:
        return min(args.limit_scale * own_s, args.budget_s - GRACE_S - (time.perf_counter() - t0))

    def skipped(name: str) -> dict:
        print(f"[{name}] skipped: the suite's budget of {args.budget_s:.0f} s is spent", flush=True)
        return {"kind": "skipped", "ok": False, "exit_code": None, "interrupted": False,
                "why": "the suite's time budget"}

    try:
        if "checks" in only:
            left = limit(CHECKS_LIMIT_S)
            report["results"]["checks"] = (run_checks(left, args, work, python) if left >= 20
                                           else skipped("checks"))
        for w in WORKLOADS:
            if w.name in only:
                left = limit(w.limit_s)
                report["results"][w.name] = (run_train(w, args, work, python, left) if left >= 20
                                             else skipped(w.name))
        for name, size3, own in STEPS:
            if name in only:
                left = limit(own)
                report["results"][name] = (run_step(name, size3, left, args, work, python)
                                           if left >= 20 else skipped(name))
        for name, (_, _, _, own, _) in ROUNDS.items():
            if name in only:
                left = limit(own)
                report["results"][name] = (run_round(name, left, args, work, python)
                                           if left >= 20 else skipped(name))
    finally:
        if tmp is not None:
            tmp.cleanup()
    adapters = [r.get("adapter") for r in report["results"].values() if r.get("adapter")]
    report["machine"] = {"adapter": adapters[0] if adapters else None,
                         "python": sys.version.split()[0], "platform": sys.platform}
    report["wall_s"] = time.perf_counter() - t0
    rows = markdown_rows(report)
    report["markdown"] = rows
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    out.with_suffix(".md").write_text(rows + "\n")
    if args.update_docs:
        update_docs(Path(args.update_docs), rows)
    print(rows)
    print(f"suite: {report['wall_s']:.0f} s; {out} and {out.with_suffix('.md')} written")
    return 0 if all(r["ok"] for r in report["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
