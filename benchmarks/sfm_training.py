"""Training on SfM poses against the published ones (docs/sfm.md, issue 34): held-out PSNR/SSIM
of the fast mode (``--preset fast``: the ``fast`` strategy) at ``-r 4`` with ``--eval``, at step
1 000 and at the end of a ``--steps`` run, once on the scene ``make_scene`` makes from the photos
alone (default settings) and once on the published scene, both holding out the same photos.

    python benchmarks/sfm_training.py [--scenes mouse,fox] [--steps 3000] [--eval-at 1000]
        [--seeds 0,1] [--work runs/sfm_training] [--json out.json] [-r 4] [--again]
    python benchmarks/sfm_training.py --rows out.json     # print the table of an earlier run

Each training run is the ``train`` command in a fresh process (as benchmarks/bench_fast.py
runs it); its ``metrics.json`` gives the held-out PSNR/SSIM and N at each evaluation, its
``train.log`` the ``done:`` line (training time, it/s). ``--work`` keeps the SfM results
(``sfm/<scene>``, reused by ``make_scene`` when the photos and settings are unchanged), the
scene folders built for the runs (``scenes/``) and the runs (``runs/<scene>_<poses>_s<seed>``,
a finished one reused unless ``--again``).

What makes the two runs of a scene comparable (printed and recorded with the results):

- **The same pixels.** ``make_scene`` writes the photos at most 1 600 px on a side (its
  default ``max_side``); the published scenes hold them at 1 920. At ``-r 4`` the two runs would
  train and be scored at different sizes (400 against 480 px), and PSNRs at different sizes do not
  compare. The SfM run therefore reads the original photos, the files the published run reads,
  with the SfM's cameras rescaled to their size (``pycolmap.Camera.rescale``: focal length and
  principal point scale with the image, the radial coefficient does not); its poses, points and
  lens model are the SfM's. A photo whose size is not the rescaled camera's stops the script.
- **The same photos.** ``--eval`` holds out every 8th camera sorted by name
  (``wgsl_splat/data/split.py``), so two scenes that register different photos split them
  differently (mouse: the SfM registers 59, the published model 56). Both runs are restricted to
  the photos registered in both: the others are deregistered from a copy of the COLMAP model
  (or their frames left out of a copy of transforms.json), so the held-out photos and the
  training photos are the same names in both runs. The script loads both splits and stops if
  the names differ. The SfM run scores its held-out photos with the SfM's own poses for them:
  they are registered in the same reconstruction, and never trained on.

- **The same points, where the published scene has none.** A transforms.json scene without a
  point cloud (fox) would start from random points against the SfM run's SfM points; its copy
  gets the SfM points instead, moved into its frame by the similarity that aligns the SfM
  cameras onto its cameras (``same_initialisation``).

Both runs of a scene are therefore scored on the same held-out photos at the same size; what
differs is each scene's calibration (poses, intrinsics, lens model, and so the undistorted
ground truth), its world frame, and, where the published scene has its own point cloud (mouse),
the initialisation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_fast import machine  # noqa: E402  (this folder: the scripts run from it)

from wgsl_splat.data.colmap_model import find_model  # noqa: E402
from wgsl_splat.data.datasets import load_dataset  # noqa: E402
from wgsl_splat.data.images import read_image_size  # noqa: E402
from wgsl_splat.data.sfm import SfmSettings, make_scene  # noqa: E402
from wgsl_splat.data.sfm.compare import pose_errors  # noqa: E402

DATA = Path(os.environ.get("WGSL_SPLAT_DATA", ROOT.parent / "shared" / "data"))
DONE = re.compile(r"done: (\d+) steps(?: \(\d+\.\.\d+\))? in ([\d.]+)s \(([\d.]+) it/s\), N (\d+)")


class Mismatch(RuntimeError):
    """The two runs of a scene would not be scored on the same photos at the same size."""


def published_names(folder: Path) -> list[str]:
    return sorted(c.name for c in load_dataset(folder).cameras)


def colmap_copy(scene: Path, out: Path, keep: set[str], photos: Path) -> dict:
    """``out``: a COLMAP scene folder with ``scene``'s model restricted to the images named in
    ``keep`` (the others deregistered) and its cameras rescaled to the size of the photos in
    ``photos``, which ``out/images`` links to. Returns what was changed."""
    import pycolmap

    model = find_model(scene / "sparse" / "0") or find_model(scene / "sparse")
    rec = pycolmap.Reconstruction(str(model[0]))
    dropped = sorted(im.name for im in rec.images.values() if im.name not in keep)
    frames = {im.frame_id for im in rec.images.values() if im.name not in keep}
    points = rec.num_points3D()
    for frame_id in frames:   # COLMAP also deletes the points left seen by fewer than two
        rec.deregister_frame(frame_id)
    scaled = {}
    for camera_id, cam in rec.cameras.items():
        names = [im.name for im in rec.images.values() if im.camera_id == camera_id]
        sizes = {read_image_size(photos / n) for n in names}
        if not sizes:
            continue
        if len(sizes) > 1:
            raise Mismatch(f"camera {camera_id}'s photos have several sizes: {sorted(sizes)}")
        (w, h), = sizes
        if (w, h) != (cam.width, cam.height):
            if abs(w / cam.width - h / cam.height) > 1e-3:
                raise Mismatch(f"camera {camera_id} is {cam.width}x{cam.height}, its photos "
                               f"{w}x{h}: not the same image at another size")
            scaled[camera_id] = f"{cam.width}x{cam.height} -> {w}x{h}"
            cam.rescale(w, h)
    if out.exists():
        shutil.rmtree(out)
    (out / "sparse" / "0").mkdir(parents=True)
    rec.write_binary(str(out / "sparse" / "0"))
    (out / "images").symlink_to(photos.resolve(), target_is_directory=True)
    return {"dropped": dropped, "rescaled": scaled, "points": [points, rec.num_points3D()]}


def transforms_copy(scene: Path, out: Path, keep: set[str]) -> dict:
    """``out``: ``scene``'s transforms.json without the frames whose photo is not named in
    ``keep``, its file paths made absolute (the photos stay where they are)."""
    meta = json.loads((scene / "transforms.json").read_text())
    frames, dropped = [], []
    for f in meta["frames"]:
        path = (scene / f["file_path"]).resolve()
        (frames if path.name in keep else dropped).append(dict(f, file_path=str(path)))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "transforms.json").write_text(json.dumps(dict(meta, frames=frames), indent=1))
    return {"dropped": sorted(Path(f["file_path"]).name for f in dropped), "rescaled": {},
            "points": None}


def write_point_cloud(path: Path, xyz: np.ndarray, rgb: np.ndarray) -> None:
    """An ASCII PLY of vertices with colours (``rgb`` in [0, 1])."""
    c = np.clip(np.round(np.asarray(rgb) * 255), 0, 255).astype(int)
    lines = [f"{x:.7g} {y:.7g} {z:.7g} {r} {g} {b}" for (x, y, z), (r, g, b) in zip(xyz, c)]
    path.write_text("ply\nformat ascii 1.0\n" f"element vertex {len(lines)}\n"
                    "property float x\nproperty float y\nproperty float z\n"
                    "property uchar red\nproperty uchar green\nproperty uchar blue\n"
                    "end_header\n" + "\n".join(lines) + "\n")


def same_initialisation(sfm_scene: Path, pub_scene: Path, log=print) -> dict:
    """Give ``pub_scene`` (a copy of a transforms.json scene without a point cloud) the SfM
    points, moved into its frame by the similarity that aligns the SfM cameras onto its cameras
    (wgsl_splat/data/sfm/compare.py): both runs then start from the same points, and what differs
    is the calibration alone. Without it the published run starts from random points (fox: 7.5 dB
    behind at step 1 000 for that reason, docs/sfm.md)."""
    ours, theirs = (load_dataset(f) for f in (sfm_scene, pub_scene))
    poses = [{c.name: c.world_to_camera for c in d.cameras} for d in (ours, theirs)]
    fit = pose_errors(*poses)
    s, rot, t = fit["similarity"]
    xyz = s * np.asarray(ours.points, np.float64) @ rot.T + t
    write_point_cloud(pub_scene / "points3d.ply", xyz, ours.point_colors)
    meta_file = pub_scene / "transforms.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps(dict(meta, ply_file_path="points3d.ply"), indent=1))
    centre = np.array(list(fit["centre"].values()))
    log(f"same initialisation: {len(xyz)} SfM points moved into the published frame (cameras "
        f"aligned to {np.median(centre):.2%} median, {centre.max():.2%} worst centre error)")
    return {"points": len(xyz), "scale": s, "centre_median": float(np.median(centre)),
            "centre_worst": float(centre.max())}


def prepare(scene: str, work: Path, resolution: int, log=print) -> dict:
    """The SfM result of ``scene``'s photos and the two scene folders to train on (module doc)."""
    published = DATA / scene
    t = time.perf_counter()
    sfm = make_scene(published / "images", work / "sfm" / scene, SfmSettings(), log=log)
    sfm_wall = time.perf_counter() - t
    for line in sfm.lines():
        log(line)
    ours, theirs = published_names(sfm.folder), published_names(published)
    common = set(ours) & set(theirs)
    sfm_scene = work / "scenes" / f"{scene}_sfm"
    sfm_changes = colmap_copy(sfm.folder, sfm_scene, common, published / "images")
    pub_changes = {"dropped": [], "rescaled": {}, "points": None}
    pub_scene = published
    transforms = (published / "transforms.json").is_file()
    no_cloud = transforms and "ply_file_path" not in json.loads(
        (published / "transforms.json").read_text())
    if set(theirs) - common or no_cloud:
        pub_scene = work / "scenes" / f"{scene}_published"
        if transforms:
            pub_changes = transforms_copy(published, pub_scene, common)
        else:
            pub_changes = colmap_copy(published, pub_scene, common, published / "images")
    if no_cloud:
        pub_changes["same_init"] = same_initialisation(sfm_scene, pub_scene, log)
    splits = {}
    for which, folder in (("sfm", sfm_scene), ("published", pub_scene)):
        d = load_dataset(folder, resolution=resolution, eval_split=True)
        splits[which] = dict(
            test=[d.cameras[i].name for i in d.test_indices],
            train=[d.cameras[i].name for i in d.train_indices],
            size=sorted({(d.cameras[i].width, d.cameras[i].height) for i in d.test_indices}))
    for key in ("test", "train", "size"):
        if splits["sfm"][key] != splits["published"][key]:
            raise Mismatch(f"{scene}: the runs' {key} differ: SfM {splits['sfm'][key]}, "
                           f"published {splits['published'][key]}")
    s = sfm.record["summary"]
    log(f"{scene}: SfM registered {s['registered']} of {s['total']}, the published scene "
        f"{len(theirs)}; training on the {len(common)} in both (SfM run leaves out "
        f"{sfm_changes['dropped'] or 'none'}, published run {pub_changes['dropped'] or 'none'}); "
        f"SfM points {sfm_changes['points'][0]} -> {sfm_changes['points'][1]}; "
        f"SfM cameras rescaled {sfm_changes['rescaled'] or 'none'}; "
        f"{len(splits['sfm']['test'])} held out: {splits['sfm']['test']}")
    return dict(scene=scene, sfm_folder=str(sfm.folder), sfm_reused=sfm.reused,
                sfm_wall_s=sfm_wall, sfm_summary=s, sfm_settings=sfm.record["settings"],
                registered_sfm=len(ours), registered_published=len(theirs), common=len(common),
                sfm_changes=sfm_changes, published_changes=pub_changes,
                folders={"sfm": str(sfm_scene), "published": str(pub_scene)},
                held_out=splits["sfm"]["test"], train_views=len(splits["sfm"]["train"]),
                eval_sizes=splits["sfm"]["size"])


def train(folder: str, out: Path, seed: int, steps: int, eval_at: list[int], resolution: int,
          extra: list[str], again: bool, stop_at: int | None = None) -> dict:
    """One ``train`` run in a fresh process; its held-out metrics per evaluation step.

    ``stop_at``: stop the run (SIGINT: the trainer saves a checkpoint and exits) once its
    evaluation at that step is written; the result is marked ``partial``. A later call continues
    a stopped run from its checkpoint (``--resume latest``: the run's own configuration), so the
    steps after ``stop_at`` come out as one uninterrupted run would give them."""
    metrics_file = out / "metrics.json"
    finished = out / "sfm_training.json"
    if finished.exists() and not again:
        result = json.loads(finished.read_text())
        if not result.get("partial") or (stop_at is not None and str(stop_at) in result["curve"]):
            return result
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    before = json.loads(finished.read_text()) if finished.exists() and not again else None
    if before is not None:   # a run stopped at an earlier stop_at: continue it
        cmd = [sys.executable, "-m", "wgsl_splat", "train", "--out", str(out), "--resume", "latest"]
    else:
        cmd = [sys.executable, "-m", "wgsl_splat", "train", folder, "-r", str(resolution),
               "--eval", "--preset", "fast", "--iters", str(steps),
               "--eval-at", ",".join(str(s) for s in eval_at if s < steps) or str(steps),
               "--seed", str(seed), "--out", str(out), "--overwrite"] + extra
    print(" ".join(cmd), flush=True)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
    stopped = False
    while proc.poll() is None:
        time.sleep(5)
        if stop_at is not None and stop_at < steps and not stopped and metrics_file.exists():
            try:
                stopped = f"iteration_{stop_at}" in json.loads(metrics_file.read_text())
            except ValueError:   # written atomically, but be safe
                continue
            if stopped:
                proc.send_signal(signal.SIGINT)
    rc = proc.wait()
    wall = time.perf_counter() - t + (before["wall_s"] if before else 0.0)
    if rc != 0 and not (stopped and rc == 130):
        raise subprocess.CalledProcessError(rc, cmd)
    return collect(out, (before or {}).get("args", cmd[2:]), seed, wall, rc != 0,
                   (before or {}).get("load_average", []) + [load, os.getloadavg()[0]])


def collect(out: Path, args: list[str], seed: int, wall: float, partial: bool,
            load_average: list[float]) -> dict:
    """The result of the run in ``out`` from its metrics.json and train.log (written into
    ``out/sfm_training.json``)."""
    metrics = json.loads((out / "metrics.json").read_text())
    done = [m for m in map(DONE.search, (out / "train.log").read_text().splitlines()) if m]
    curve = {int(k.split("_")[1]): dict(psnr=v["mean"]["psnr"], ssim=v["mean"]["ssim"],
                                        n=v["num_gaussians"], views=v["views"], split=v["split"],
                                        eval_s=v["seconds"])
             for k, v in metrics.items() if k.startswith("iteration_")}
    result = dict(args=args, seed=seed, curve={str(k): curve[k] for k in sorted(curve)},
                  partial=partial, wall_s=wall, load_average=load_average,
                  train_s=sum(float(m.group(2)) for m in done),
                  steps_done=sum(int(m.group(1)) for m in done),
                  eval_s=sum(c["eval_s"] for c in curve.values()))
    result["it_per_s"] = result["steps_done"] / result["train_s"] if result["train_s"] else None
    (out / "sfm_training.json").write_text(json.dumps(result, indent=1))
    return result


def table(rows: list[dict]) -> None:
    print("| scene | seed | step | PSNR SfM / published | Δ dB | SSIM SfM / published | Δ SSIM "
          "| N SfM / published | wall s SfM / published |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        for seed, runs in sorted(r["runs"].items()):
            a, b = runs["sfm"], runs["published"]
            for step in a["curve"]:
                x, y = a["curve"][step], b["curve"].get(step)
                if y is None:
                    continue
                print(f"| {r['scene']} | {seed} | {step} | {x['psnr']:.2f} / {y['psnr']:.2f} | "
                      f"{x['psnr'] - y['psnr']:+.2f} | {x['ssim']:.4f} / {y['ssim']:.4f} | "
                      f"{x['ssim'] - y['ssim']:+.4f} | {x['n']} / {y['n']} | "
                      f"{a['wall_s']:.0f} / {b['wall_s']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenes", default="mouse,fox")
    ap.add_argument("--steps", type=int, default=3000, help="training steps (the last is evaluated)")
    ap.add_argument("--eval-at", default="1000", help="earlier held-out evaluations")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("-r", "--resolution", type=int, default=4)
    ap.add_argument("--work", default=str(ROOT / "runs" / "sfm_training"),
                    help="SfM results, scene folders and runs (kept: a re-run reuses them)")
    ap.add_argument("--stop-at", type=int, default=None,
                    help="stop each run after its evaluation at this step (a checkpoint is "
                         "written; a later call without it, or with a later step, continues it)")
    ap.add_argument("--again", action="store_true", help="redo finished training runs")
    ap.add_argument("--json", default=None)
    ap.add_argument("--rows", default=None, help="a --json file of an earlier run: print its table")
    ap.add_argument("extra", nargs="*", help="more train flags for both runs (after --)")
    args = ap.parse_args()
    if args.rows:
        table(json.loads(Path(args.rows).read_text()))
        return
    work = Path(args.work)
    eval_at = [int(s) for s in args.eval_at.split(",") if s]
    rows = []
    for scene in args.scenes.split(","):
        row = prepare(scene, work, args.resolution)
        row.update(machine=machine(), steps=args.steps, resolution=args.resolution, runs={})
        rows.append(row)
        for seed in (int(s) for s in args.seeds.split(",")):
            runs = {}
            for which in ("sfm", "published"):
                out = work / "runs" / f"{scene}_{which}_s{seed}"
                runs[which] = train(row["folders"][which], out, seed, args.steps, eval_at,
                                    args.resolution, args.extra, args.again, args.stop_at)
                r = runs[which]
                print(f"{scene} {which} seed {seed}: " + (", ".join(
                    f"{k}: {v['psnr']:.2f} dB / {v['ssim']:.4f}, N {v['n']} ({v['views']} "
                    f"{v['split']} views)" for k, v in r["curve"].items()) or "no evaluation")
                    + f"; {r['steps_done']} steps, wall {r['wall_s']:.0f} s"
                    + (" (stopped early)" if r["partial"] else ""), flush=True)
            row["runs"][str(seed)] = runs
            if args.json:   # a run stopped later keeps what is done
                Path(args.json).write_text(json.dumps(rows, indent=1))
    table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
