"""What stands between a held-out camera and the object it looks at (issue 36's late decline).

    python benchmarks/fog_in_view.py RUN_DIR ITERATION VIEW_PREFIX

Reads a run's ``cameras.json`` and its PLY at ``ITERATION``; for the camera whose image name starts
with ``VIEW_PREFIX``: the object is the opaque Gaussians (opacity > 0.5) projecting into the middle
60 % of the view's width, its depth their median; "in front" is every Gaussian projecting into the
view closer than 0.8× that depth. Prints how many there are, their opacity and scale against the
model's, how many training views each falls inside, and the camera's elevation over the object
(about the capture's up) against the training cameras'. A geometric look at the means, not a
render: it says where the fog is, the held-out PSNR says what it costs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.app.common import load_cameras_json  # noqa: E402
from wgsl_splat.app.view_camera import capture_up  # noqa: E402
from wgsl_splat.data.ply import load_ply  # noqa: E402


def project(cam, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pixel coordinates and depth of ``points`` in ``cam`` (pinhole)."""
    x = points @ cam.world_to_camera[:3, :3].T + cam.world_to_camera[:3, 3]
    z = x[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        return cam.fx * x[:, 0] / z + cam.cx, cam.fy * x[:, 1] / z + cam.cy, z


def in_view(cam, u, v, z) -> np.ndarray:
    return (z > 0) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("iteration", type=int)
    ap.add_argument("view", help="the held-out image's name, or its first characters")
    args = ap.parse_args()
    run = Path(args.run)
    cams, train_idx = load_cameras_json(run / "cameras.json")
    train = [cams[i] for i in train_idx]
    found = [c for c in cams if c.name.startswith(args.view)]
    if len(found) != 1:
        sys.exit(f"{len(found)} cameras' names start with {args.view!r}")
    cam = found[0]
    model = load_ply(run / "point_cloud" / f"iteration_{args.iteration}" / "point_cloud.ply")
    mu = model.means.astype(np.float64)
    opacity = 1.0 / (1.0 + np.exp(-model.opacity_logits.astype(np.float64)))
    scale = np.exp(model.log_scales.astype(np.float64)).max(axis=1)

    u, v, z = project(cam, mu)
    inside = in_view(cam, u, v, z)
    obj = inside & (opacity > 0.5) & (np.abs(u - cam.cx) < 0.3 * cam.width)
    if not obj.any():
        sys.exit("no opaque Gaussian in the middle of that view")
    depth = float(np.median(z[obj]))
    front = inside & (z < 0.8 * depth)
    seen = np.zeros(len(mu), int)
    for c in train:
        seen += in_view(c, *project(c, mu))

    up = np.asarray(capture_up(train), np.float64)
    up /= np.linalg.norm(up)
    centre = np.median(mu[obj], axis=0)

    def elevation(c) -> float:
        d = c.center - centre
        return float(np.degrees(np.arcsin(d @ up / np.linalg.norm(d))))

    train_elev = np.array([elevation(c) for c in train])
    print(f"{cam.name}: N {len(mu)}; object depth {depth:.3f} ({obj.sum()} opaque Gaussians)")
    print(f"in front (closer than 0.8x): {front.sum()} ({front.mean():.1%} of N); opacity median "
          f"{np.median(opacity[front]):.3f} (all {np.median(opacity):.3f}), largest scale median "
          f"{np.median(scale[front]):.4f} (all {np.median(scale):.4f}), opacity summed "
          f"{opacity[front].sum():.1f}")
    print(f"training views each falls inside: median {np.median(seen[front]):.0f} of {len(train)}")
    print(f"elevation over the object: this view {elevation(cam):.1f} deg; training views min "
          f"{train_elev.min():.1f}, median {np.median(train_elev):.1f}, max {train_elev.max():.1f}; "
          f"{(train_elev < elevation(cam)).sum()} lower than this view")


if __name__ == "__main__":
    main()
