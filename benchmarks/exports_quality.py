"""Size and held-out quality of every export format against the full PLY (docs/exports.md).

Each export is written by ``wgsl_splat.data.exports``, read back by PlayCanvas's
``splat-transform`` (converted to a float PLY: a reader nobody here wrote), rendered by our GPU
renderer on the scene's held-out views in the PLY's render mode, and scored as the evaluation
scores (8-bit PSNR / SSIM against the ground truth), next to the PLY's own score and the PSNR of
the export's render against the PLY's render.

    python benchmarks/exports_quality.py RUN/point_cloud/iteration_7000/point_cloud.ply \\
        --data ../shared/data/lego -r 8 --background 1,1,1 [--sog-palettes 1024,4096] [--json F]

splat-transform: ``.ci/node`` (what .ci/run installs), $WGSL_SPLAT_NODE_TOOLS, or on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def splat_transform() -> list[str]:
    tools = os.environ.get("WGSL_SPLAT_NODE_TOOLS", os.path.join(REPO, ".ci", "node"))
    cli = os.path.join(tools, "node_modules", "@playcanvas", "splat-transform", "bin", "cli.mjs")
    if os.path.isfile(cli):
        return ["node", cli]
    if shutil.which("splat-transform"):
        return ["splat-transform"]
    raise SystemExit("needs splat-transform: npm install --prefix .ci/node @playcanvas/splat-transform")


def read_back(path: str, scratch: str):
    """The export as splat-transform decodes it, as a GaussianModel (and the tag it reads)."""
    from wgsl_splat.model import GaussianModel

    out = os.path.join(scratch, "back.ply")
    subprocess.run(splat_transform() + ["-q", "-w", path, out], check=True)
    raw = open(out, "rb").read()
    head, _, body = raw.partition(b"end_header\n")
    lines = head.decode("ascii").splitlines()
    n = int(next(l for l in lines if l.startswith("element vertex")).split()[2])
    names = [l.split()[2] for l in lines if l.startswith("property float")]
    table = np.frombuffer(body, np.dtype([(k, "<f4") for k in names]), count=n)
    col = lambda *keys: np.stack([table[k] for k in keys], axis=1).astype(np.float32)
    n_rest = sum(k.startswith("f_rest_") for k in names)
    sh = col("f_dc_0", "f_dc_1", "f_dc_2")[:, None, :]
    if n_rest:
        rest = col(*[f"f_rest_{i}" for i in range(n_rest)]).reshape(n, 3, n_rest // 3)
        sh = np.concatenate([sh, rest.transpose(0, 2, 1)], axis=1)
    # compressed PLY decodes an opacity byte of 0 as a logit of -inf: the same invisible splat
    opacity = np.maximum(np.array(table["opacity"], np.float32), -40.0)
    return GaussianModel(means=col("x", "y", "z"), log_scales=col("scale_0", "scale_1", "scale_2"),
                         quats=col("rot_0", "rot_1", "rot_2", "rot_3"), opacity_logits=opacity,
                         sh=np.ascontiguousarray(sh))


def rub_to_rdf(model):
    """Undo SPZ's axis change (the file is right-up-back, the scene right-down-front)."""
    from wgsl_splat.data.exports.spz import RDF_TO_RUB, sh_axis_signs

    out = model.copy()
    out.means[:] = model.means * RDF_TO_RUB
    out.quats[:] = model.quats * np.array([1, 1, -1, -1], np.float32)
    out.sh[:, 1:] = model.sh[:, 1:] * sh_axis_signs(RDF_TO_RUB, model.sh_degree)[None, :, None]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ply")
    ap.add_argument("--data", required=True)
    ap.add_argument("-r", "--resolution", type=int, default=1)
    ap.add_argument("--background", default="0,0,0")
    ap.add_argument("--formats", default=None, help="comma-separated (default: all)")
    ap.add_argument("--sog-palettes", default="", help="extra SOG runs with these SH palettes")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from wgsl_splat.app.common import load_training_data
    from wgsl_splat.data.exports import FORMAT_NAMES, export_model, get_format
    from wgsl_splat.data.ply import load_ply_with_mode
    from wgsl_splat.gpu.renderer import GpuRenderer
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.reference.loss import psnr
    from wgsl_splat.render_config import render_config
    from wgsl_splat.training.evaluation import image_metrics, quantised

    background = [float(v) for v in args.background.split(",")]
    model, mode = load_ply_with_mode(args.ply)
    dataset = load_training_data(args.data, args.resolution, True, background)
    views = list(dataset.test_indices)
    ctx = select_device("gpu")
    renderer = GpuRenderer(ctx, config=render_config(mode))

    def score(m, reference=None):
        renderer.upload_model(m)
        psnrs, ssims, vs_ply, images = [], [], [], []
        for i in views:
            img = renderer.render(dataset.cameras[i], background)
            metrics = image_metrics(img, dataset.load_image(i))
            psnrs.append(metrics["psnr"])
            ssims.append(metrics["ssim"])
            if reference is not None:
                vs_ply.append(psnr(quantised(img), quantised(reference[len(images)])))
            images.append(img)
        return dict(psnr=float(np.mean(psnrs)), ssim=float(np.mean(ssims)),
                    psnr_vs_ply=float(np.mean(vs_ply)) if vs_ply else None), images

    ply_bytes = os.path.getsize(args.ply)
    base, reference = score(model)
    rows = [dict(format="ply", bytes=ply_bytes, ratio=1.0, seconds=None, **base)]
    runs = [(name, {}) for name in (args.formats.split(",") if args.formats else FORMAT_NAMES)]
    runs += [("sog", {"palette": int(p)}) for p in args.sog_palettes.split(",") if p]
    with tempfile.TemporaryDirectory() as scratch:
        for name, options in runs:
            fmt = get_format(name)
            path = os.path.join(scratch, "model" + fmt.suffix)
            t0 = time.perf_counter()
            result = export_model(model, mode, fmt, path, **options)
            seconds = time.perf_counter() - t0
            back = read_back(path, scratch)
            if name == "spz":
                back = rub_to_rdf(back)
            metrics, _ = score(back, reference)
            label = name + (f" (palette {options['palette']})" if options else "")
            notes = [n for n in result.encoded.notes if "palette" in n]
            rows.append(dict(format=label, bytes=result.num_bytes,
                             ratio=result.num_bytes / ply_bytes, seconds=seconds, notes=notes,
                             **metrics))
            print(f"{label}: {result.num_bytes / 1e6:.2f} MB in {seconds:.1f}s, "
                  f"{metrics['psnr']:.2f} dB", file=sys.stderr)

    print(f"{model.num} Gaussians, SH degree {model.sh_degree}, {mode}; {len(views)} held-out "
          f"views of {args.data} at -r {args.resolution}\n")
    print("| format | size | of the PLY | held-out PSNR | SSIM | PSNR vs the PLY's render | "
          "export time |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        vs = "—" if r["psnr_vs_ply"] is None else f"{r['psnr_vs_ply']:.1f} dB"
        t = "—" if r["seconds"] is None else f"{r['seconds']:.1f} s"
        print(f"| {r['format']} | {r['bytes'] / 1e6:.2f} MB | {100 * r['ratio']:.1f} % | "
              f"{r['psnr']:.2f} dB | {r['ssim']:.4f} | {vs} | {t} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(ply=args.ply, data=args.data, resolution=args.resolution,
                           num=model.num, mode=mode, views=len(views), rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
