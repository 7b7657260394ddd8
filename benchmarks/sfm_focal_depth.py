"""Where the SfM's cameras differ from the published ones, and whether the published focal
lengths explain it (docs/sfm.md, "mouse's centre error is the published focal lengths").

    python benchmarks/sfm_focal_depth.py SFM_SCENE PUBLISHED_SCENE [--json out.json]

A focal length and a distance along the view axis trade against each other: a camera with k
times the focal length sees the object at the same size from k times as far. Where one model
gives each photo its own focal length and the other one per camera, their centres can differ
along the view axes by exactly that. After the similarity alignment of ``sfm_accuracy.py``
(``compare.pose_errors``) each camera's centre error is split along the published camera's view
axis and across it, and the along-axis part is compared with the focal lengths' prediction,
``D · (1 − k / median k)`` with ``k = f_sfm / f_published`` (a ratio all cameras share is taken
up by the similarity's scale), D the published camera's distance to the median published
point along its axis (the SfM's median point where the published scene has none) (``sfm_accuracy.py --keep DIR`` keeps an SfM folder to read).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wgsl_splat.data.datasets import load_dataset  # noqa: E402
from wgsl_splat.data.sfm.compare import centre_and_rotation, pose_errors  # noqa: E402


def focal_depth(sfm_scene: Path, published_scene: Path) -> dict:
    ours, theirs = load_dataset(sfm_scene), load_dataset(published_scene)
    o = {c.name: c for c in ours.cameras}
    p = {c.name: c for c in theirs.cameras}
    e = pose_errors({n: c.world_to_camera for n, c in o.items()},
                    {n: c.world_to_camera for n, c in p.items()})
    if theirs.points is not None and len(theirs.points):
        middle = np.median(theirs.points, axis=0)
    else:       # a published scene without points (fox): the SfM's, moved into its frame
        scale, rot, shift = e["similarity"]
        middle = scale * rot @ np.median(ours.points, axis=0) + shift
    rows = []
    for i, n in enumerate(e["names"]):
        centre, rot = centre_and_rotation(p[n].world_to_camera)
        axis = rot[2]                                   # the view direction in the world
        d = e["aligned"][i] - e["published"][i]
        along = float(d @ axis)
        distance = float((middle - centre) @ axis)
        ratio = (o[n].fx / max(o[n].width, o[n].height)) / (p[n].fx / max(p[n].width, p[n].height))
        rows.append(dict(ratio=ratio, distance=distance,name=n, focal_published=p[n].fx / max(p[n].width, p[n].height),
                         focal_sfm=o[n].fx / max(o[n].width, o[n].height),
                         along_pct=100 * along / e["extent"],
                         across_pct=100 * float(np.linalg.norm(d - along * axis)) / e["extent"],
                         ))
    # a ratio all cameras share moves them all back about the object: the similarity's scale
    # takes that up, so each camera's prediction is of its ratio to the median one
    typical = float(np.median([r["ratio"] for r in rows]))
    for r in rows:
        r["predicted_along_pct"] = 100 * r["distance"] * (1 - r["ratio"] / typical) / e["extent"]
    along = np.array([r["along_pct"] for r in rows])
    across = np.array([r["across_pct"] for r in rows])
    predicted = np.array([r["predicted_along_pct"] for r in rows])
    # one focal length in both models (fox): nothing to predict, no correlation
    varies = np.ptp(predicted) > 1e-9
    return dict(cameras=len(rows),
                correlation=float(np.corrcoef(along, predicted)[0, 1]) if varies else None,
                centre_pct=[float(np.median(np.hypot(along, across))),
                            float(np.hypot(along, across).max())],
                along_pct=[float(np.median(np.abs(along))), float(np.abs(along).max())],
                across_pct=[float(np.median(across)), float(across.max())],
                rows=sorted(rows, key=lambda r: -abs(r["along_pct"])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sfm_scene")
    ap.add_argument("published_scene")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    r = focal_depth(Path(args.sfm_scene), Path(args.published_scene))
    print(f"{r['cameras']} cameras; centre error median / worst {r['centre_pct'][0]:.2f} / "
          f"{r['centre_pct'][1]:.2f} % of the extent: along the view axes {r['along_pct'][0]:.2f} / "
          f"{r['along_pct'][1]:.2f} %, across {r['across_pct'][0]:.2f} / {r['across_pct'][1]:.2f} %; "
          + (f"the along-axis error against the focal lengths' prediction: r = "
             f"{r['correlation']:.3f}" if r["correlation"] is not None else
             "one focal length ratio for every camera: nothing to predict"))
    print("| photo | focal / long side, published | SfM | along the view axis | predicted by the focal lengths | across |")
    print("|---|---|---|---|---|---|")
    for x in r["rows"][:8]:
        print(f"| {x['name'][:8]} | {x['focal_published']:.3f} | {x['focal_sfm']:.3f} | "
              f"{x['along_pct']:+.2f} % | {x['predicted_along_pct']:+.2f} % | {x['across_pct']:.2f} % |")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
