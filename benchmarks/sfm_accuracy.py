"""SfM from the photos alone against the published poses (docs/sfm.md): for each scene, run
``make_scene`` on its photos into a scratch folder, align the recovered cameras to the published
ones with a similarity (Umeyama, wgsl_splat.data.sfm.compare) and report the registered count,
the rotation error (degrees) and the camera-centre error (% of the published cameras' extent),
median and worst, and the time of each stage. ``--plot`` draws the recovered cameras over the
published ones (needs matplotlib, only for this script).

    python benchmarks/sfm_accuracy.py [--scenes mouse,fox] [--mapper incremental|global]
        [--sfm-side 1024] [--max-side 1600] [--json out.json] [--plot docs/sfm_cameras.png]
    python benchmarks/sfm_accuracy.py --rows mouse.json,fox.json --plot docs/sfm_cameras.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wgsl_splat.data.datasets import load_dataset  # noqa: E402
from wgsl_splat.data.sfm import SfmSettings, make_scene  # noqa: E402
from wgsl_splat.data.sfm.compare import error_summary, pose_errors  # noqa: E402

DATA = Path(os.environ.get("WGSL_SPLAT_DATA", ROOT.parent / "shared" / "data"))


def measure(scene: str, settings: SfmSettings, scratch: Path) -> dict:
    published = load_dataset(DATA / scene)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    result = make_scene(DATA / scene / "images", scratch / scene, settings, log=print)
    wall = time.perf_counter() - t
    ours = load_dataset(result.folder)
    e = pose_errors({c.name: c.world_to_camera for c in ours.cameras},
                    {c.name: c.world_to_camera for c in published.cameras})
    s = result.record["summary"]
    return {
        "scene": scene, "registered": s["registered"], "total": s["total"],
        "published_registered": len(published.cameras), "common": len(e["names"]),
        **error_summary(e),
        "points": s["points"], "reprojection_error_px": s["reprojection_error"],
        "seconds": s["seconds"], "cpu_seconds": s["cpu_seconds"], "wall_s": wall,
        "load_average": [load, os.getloadavg()[0]], "settings": result.record["settings"],
        "aligned": e["aligned"].tolist(), "published": e["published"].tolist(),
        "outliers": e["outliers"],
        "worst": sorted(((e["centre"][n] * 100, e["rotation_deg"][n], n) for n in e["names"]),
                        reverse=True)[:5],
    }


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(6 * len(rows), 5.5))
    for i, r in enumerate(rows):
        ax = fig.add_subplot(1, len(rows), i + 1, projection="3d")
        p, a = np.array(r["published"]), np.array(r["aligned"])
        ax.scatter(*p.T, s=40, facecolors="none", edgecolors="tab:blue", label="published")
        ax.scatter(*a.T, s=8, c="tab:red", label="SfM (aligned)")
        for u, v in zip(p, a):
            ax.plot(*np.stack([u, v]).T, c="k", lw=0.5)
        ax.set_title(f"{r['scene']}: {r['registered']}/{r['total']} registered, rot "
                     f"{r['rotation_deg_median']:.2f}° / centre {r['centre_pct_median']:.2f}% "
                     f"(median)", fontsize=9)
        ax.legend(fontsize=8)
        ax.set_box_aspect(np.ptp(p, axis=0) + 1e-9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenes", default="mouse,fox")
    ap.add_argument("--mapper", default="incremental", choices=["incremental", "global"])
    ap.add_argument("--sfm-side", type=int, default=SfmSettings.sfm_side)
    ap.add_argument("--max-side", type=int, default=SfmSettings.max_side)
    ap.add_argument("--max-features", type=int, default=SfmSettings.max_features)
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", default=None, help="write the COLMAP folders here (default: a scratch folder)")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--rows", default=None,
                    help="comma-separated --json files of earlier runs: plot and print them, run nothing")
    args = ap.parse_args()
    if args.rows:
        rows = [r for f in args.rows.split(",") for r in json.loads(Path(f).read_text())]
        for r in rows:
            print(r["scene"], {k: v for k, v in r.items() if k not in ("aligned", "published")})
        if args.plot:
            plot(rows, args.plot)
        return
    settings = SfmSettings(max_side=args.max_side, sfm_side=args.sfm_side, mapper=args.mapper,
                           max_features=args.max_features)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sfm_accuracy_") as scratch:
        for scene in args.scenes.split(","):
            r = measure(scene, settings, Path(args.keep or scratch))
            rows.append(r)
            print(f"{scene}: registered {r['registered']}/{r['total']} (published "
                  f"{r['published_registered']}), rotation {r['rotation_deg_median']:.3f}° median "
                  f"{r['rotation_deg_worst']:.3f}° worst, centre {r['centre_pct_median']:.3f}% "
                  f"median {r['centre_pct_worst']:.3f}% worst, "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in r["seconds"].items())
                  + f", wall {r['wall_s']:.1f} s; CPU "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in r["cpu_seconds"].items())
                  + f"; load average {r['load_average'][0]:.1f}-{r['load_average'][1]:.1f}; "
                  f"outliers of the alignment {r['outliers']}; worst (centre %, deg, name) "
                  f"{r['worst'][:3]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
