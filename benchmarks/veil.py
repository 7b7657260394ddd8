"""Which Gaussians veil a held-out view (issue 36: mouse's held-out PSNR swings by 10 dB).

    python benchmarks/veil.py RUN_DIR [--iteration K] [--view PREFIX] [--candidates 48] [--json]

For every held-out view of a run (or the one whose name starts with PREFIX): the model's PSNR
(the evaluation's 8-bit protocol and masks), then the Gaussians covering the most of the view
(the largest projected radius × opacity, ``--candidates`` of them) removed one at a time and the
view rendered again. A Gaussian whose removal alone raises the view's PSNR by at least
``--min-gain`` dB veils it; the view is scored once more with every such Gaussian removed. Each is
described by what lets it veil a view it was never trained on: its depth in that camera against
its own largest scale (below 1 the camera stands inside it), its size against the scene's extent,
its opacity and how many training views hold its centre in their frustum.

A measurement, not a fix: it names what a held-out view's PSNR pays for, where ``fog_in_view.py``
counts Gaussians by where their centres fall (a veil's centre may lie outside the image).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.app.common import (  # noqa: E402
    load_run_data,
    make_renderer,
    render_mode_for,
    run_background,
    run_config,
    run_model,
)
from wgsl_splat.reference.projection import project  # noqa: E402
from wgsl_splat.training.evaluation import held_out_views, image_metrics  # noqa: E402
from wgsl_splat.training.startup import scene_extent  # noqa: E402


def without(model, drop):
    """The model without the rows in ``drop`` (indices)."""
    keep = np.ones(model.num, bool)
    keep[np.asarray(drop, int)] = False
    return model.subset(keep)


def seen_by(model, cameras) -> np.ndarray:
    """For every Gaussian, how many of ``cameras`` hold its centre in their frustum."""
    count = np.zeros(model.num, int)
    for cam in cameras:
        count += cam.sees(model.means)
    return count


def veils(run: str, iteration: int | None = None, view: str | None = None, candidates: int = 48,
          min_gain: float = 0.5, device: str = "auto") -> dict:
    """The module doc's measurement: ``dict(iteration, extent, views=[...])``; each view holds its
    ``psnr``, the ``veils`` found (largest gain first) and ``unveiled_psnr``."""
    cfg = run_config(run)
    iteration, model, mode = run_model(run, iteration)
    config = render_mode_for(mode, None, lambda *_: None)
    render, _ = make_renderer(device, config=config)
    background = run_background(cfg)
    dataset = load_run_data(cfg)
    extent = scene_extent(dataset)
    seen = seen_by(model, [dataset.cameras[i] for i in dataset.train_indices])
    scales = np.exp(model.log_scales.astype(np.float64)).max(axis=1)
    opacity = 1.0 / (1.0 + np.exp(-model.opacity_logits.astype(np.float64)))

    views = []
    for i in held_out_views(dataset):
        cam = dataset.cameras[i]
        if view and not (cam.name or "").startswith(view):
            continue
        gt = dataset.load_image(i)
        mask = dataset.load_mask(i) if hasattr(dataset, "load_mask") else None

        def score(m):
            return image_metrics(np.asarray(render(m, cam, background))[..., :3], gt, mask)["psnr"]

        base = score(model)
        proj = project(model, cam, config=config)
        cover = np.where(proj.visible, proj.radii * opacity, -1.0)
        order = [int(g) for g in np.argsort(-cover)[:candidates] if cover[g] > 0]
        found = []
        for g in order:
            gain = score(without(model, [g])) - base
            if gain >= min_gain:
                found.append(dict(index=g, gain=gain, radius_px=int(proj.radii[g]),
                                  depth=float(proj.depths[g]),
                                  depth_over_scale=float(proj.depths[g] / scales[g]),
                                  scale_over_extent=float(scales[g] / extent),
                                  opacity=float(opacity[g]), seen_by=int(seen[g])))
        found.sort(key=lambda d: -d["gain"])
        unveiled = score(without(model, [d["index"] for d in found])) if found else base
        views.append(dict(name=cam.name, psnr=base, veils=found, unveiled_psnr=unveiled))
    return dict(iteration=iteration, extent=extent, trained_views=len(dataset.train_indices),
                views=views)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--iteration", type=int, default=None, help="the saved model (default: latest)")
    ap.add_argument("--view", default=None, help="only the held-out view whose name starts so")
    ap.add_argument("--candidates", type=int, default=48,
                    help="Gaussians tried per view: the largest projected radius x opacity")
    ap.add_argument("--min-gain", type=float, default=0.5,
                    help="dB a Gaussian's removal must add to the view's PSNR to count as a veil")
    ap.add_argument("--device", default="auto", choices=("auto", "gpu", "cpu"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = veils(args.run, args.iteration, args.view, args.candidates, args.min_gain, args.device)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.run} @ {out['iteration']}: scene extent {out['extent']:.3f}, "
          f"{out['trained_views']} training views")
    for v in out["views"]:
        print(f"{v['name']}: {v['psnr']:.2f} dB; without its {len(v['veils'])} veil(s) "
              f"{v['unveiled_psnr']:.2f} dB")
        for d in v["veils"]:
            print(f"  #{d['index']}: {d['gain']:+.2f} dB alone; radius {d['radius_px']} px, depth "
                  f"{d['depth']:.3f} = {d['depth_over_scale']:.3f} x its largest scale "
                  f"({d['scale_over_extent']:.3f} x the extent), opacity {d['opacity']:.2f}, "
                  f"in {d['seen_by']} training frusta")
    ps = [v["psnr"] for v in out["views"]]
    un = [v["unveiled_psnr"] for v in out["views"]]
    if ps:
        print(f"mean: {np.mean(ps):.2f} dB; unveiled {np.mean(un):.2f} dB")


if __name__ == "__main__":
    main()
