"""What the two ways of getting splats into a browser cost and show (docs/web.md).

* ``stream`` (what ``view --web`` does): our renderer draws the browser's camera, viser sends a
  JPEG. Measured: render + JPEG encoding time and bytes per frame at a few canvas sizes.
* ``splats``: viser's WebGL Gaussian-splat node draws the model in the browser. Measured: the
  payload viser builds (and its time), and in headless chromium (SwiftShader WebGL) the page's
  image against our own render of the same camera, next to the streamed page's.
* ``hook``: the cost of ``train --preview-web``'s per-step hook while nobody is connected.

    python benchmarks/web_viewer.py MODEL.ply --data SCENE -r R [--background 1,1,1] [--json F]

Needs viser (wgsl_splat[web]), and for the browser part node, chromium and playwright-core
(``.ci/node``, as .ci/run installs them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.environ.get("WGSL_SPLAT_NODE_TOOLS", os.path.join(REPO, ".ci", "node"))
SCRIPT = os.path.join(REPO, "tests", "web", "screenshot.mjs")


def median_time(fn, repeat=5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def camera_for(cam, width, height):
    """The URL query for viser's initial camera through dataset camera ``cam`` and our Camera of
    the same view at ``width`` x ``height``."""
    from wgsl_splat.camera import Camera

    eye, forward, up = cam.center, cam.rotation[2], -cam.rotation[1]
    fov_y = 2.0 * math.atan(0.5 * cam.height / cam.fy)
    vec = lambda v: ",".join(f"{x:.10g}" for x in v)
    query = (f"initialCameraPosition={vec(eye)}&initialCameraLookAt={vec(eye + 3.0 * forward)}"
             f"&initialCameraUp={vec(up)}&initialCameraFov={fov_y:.10g}")
    f = 0.5 * height / math.tan(0.5 * fov_y)
    ours = Camera.look_at(eye, eye + 3.0 * forward, up, width=width, height=height,
                          fov_x_deg=math.degrees(2.0 * math.atan(0.5 * width / f)))
    return query, ours


def screenshot(url, out, width, height, ready) -> dict:
    proc = subprocess.run(["node", SCRIPT, os.path.join(TOOLS, "node_modules", "playwright-core"),
                           shutil.which("chromium"), url, out, str(width), str(height), "180",
                           ready], capture_output=True, text=True, timeout=300)
    if proc.returncode:
        raise SystemExit(proc.stdout + proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def page_psnr(shot_path, expected, overlays) -> float:
    import imageio.v3 as iio

    seen = iio.imread(shot_path)[..., :3] / 255.0
    mask = np.ones(seen.shape[:2], bool)
    for left, top, right, bottom in overlays:
        mask[max(0, int(top) - 4):int(bottom) + 4, max(0, int(left) - 4):int(right) + 4] = False
    want = np.round(np.clip(expected, 0, 1) * 255) / 255
    return float(10 * np.log10(1.0 / np.mean((seen[mask] - want[mask]) ** 2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ply")
    ap.add_argument("--data", required=True)
    ap.add_argument("-r", "--resolution", type=int, default=1)
    ap.add_argument("--background", default="0,0,0")
    ap.add_argument("--views", type=int, default=3, help="held-out views for the browser part")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import viser
    from viser._scene_api import _encode_image_binary

    from wgsl_splat.app.common import load_training_data
    from wgsl_splat.app.web_viewer import JPEG_QUALITY, TrainingWebPreview, WebViewer
    from wgsl_splat.data.ply import load_ply_with_mode
    from wgsl_splat.gpu.renderer import GpuRenderer
    from wgsl_splat.gpu.runtime import select_device
    from wgsl_splat.model import SH_C0
    from wgsl_splat.render_config import render_config

    background = [float(v) for v in args.background.split(",")]
    model, mode = load_ply_with_mode(args.ply)
    dataset = load_training_data(args.data, args.resolution, True, background)
    ctx = select_device("gpu")
    renderer = GpuRenderer(ctx, config=render_config(mode))
    renderer.upload_model(model)
    result = dict(model=args.ply, num=model.num, mode=mode, device=ctx.name, stream=[], splats={},
                  browser=[])

    # -- stream: render + JPEG per frame ------------------------------------------------------------
    cam0 = dataset.cameras[dataset.test_indices[0]]
    for width, height in ((640, 480), (960, 720), (1280, 720)):
        _, cam = camera_for(cam0, width, height)
        t_render = median_time(lambda: renderer.render(cam, background))
        img = renderer.render(cam, background)
        t_jpeg = median_time(lambda: _encode_image_binary(img, "jpeg", JPEG_QUALITY))
        size = len(_encode_image_binary(img, "jpeg", JPEG_QUALITY)[1])
        result["stream"].append(dict(width=width, height=height, render_ms=1e3 * t_render,
                                     jpeg_ms=1e3 * t_jpeg, jpeg_bytes=size))
        print(f"stream {width}x{height}: render {1e3 * t_render:.0f} ms, JPEG "
              f"{1e3 * t_jpeg:.1f} ms, {size / 1e3:.0f} kB", file=sys.stderr)

    # -- splats: viser's WebGL node ------------------------------------------------------------------
    q = np.asarray(model.normalized_quats, np.float64)
    w, x, y, z = q.T
    rot = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                    2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                    2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
                   axis=1).reshape(-1, 3, 3)
    scales = np.exp(model.log_scales.astype(np.float64))
    cov = rot @ (scales[:, :, None] ** 2 * np.transpose(rot, (0, 2, 1)))
    rgb = np.clip(0.5 + SH_C0 * model.sh[:, 0, :], 0.0, 1.0)       # the node takes one colour
    opacity = model.opacities.reshape(-1, 1)

    def add_splats(server):
        return server.scene.add_gaussian_splats("/model", centers=model.means, covariances=cov,
                                                rgbs=rgb, opacities=opacity)

    width, height = 640, 480
    with tempfile.TemporaryDirectory() as scratch:
        splat_server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
        t0 = time.perf_counter()
        add_splats(splat_server)
        result["splats"] = dict(payload_bytes=32 * model.num, add_seconds=time.perf_counter() - t0)
        splat_server.scene.set_background_image(np.ones((8, 8, 3)) * np.asarray(background))
        splat_server.gui.configure_theme(show_logo=False)
        stream = WebViewer("127.0.0.1", 0, title="stream", mode=mode, log=lambda *_: None)
        ready = os.path.join(scratch, "ready")
        open(ready, "w").close()
        for k, i in enumerate(dataset.test_indices[:args.views]):
            query, cam = camera_for(dataset.cameras[i], width, height)
            expected = renderer.render(cam, background)
            row = dict(view=dataset.cameras[i].name)
            for label, port in (("splats", splat_server.get_port()), ("stream", stream.port)):
                shot = os.path.join(scratch, f"{label}{k}.png")
                if label == "stream":
                    import threading

                    stop = threading.Event()

                    def serve():
                        while not stop.is_set():
                            stream.wake.wait(0.2)
                            stream.wake.clear()
                            stream.render_due(lambda c: renderer.render(c, background))

                    thread = threading.Thread(target=serve)
                    thread.start()
                    try:
                        page = screenshot(f"http://127.0.0.1:{port}/?{query}", shot, width, height,
                                          ready)
                    finally:
                        stop.set()
                        thread.join()
                else:
                    page = screenshot(f"http://127.0.0.1:{port}/?{query}", shot, width, height,
                                      ready)
                row[label] = page_psnr(shot, expected, page["overlays"])
                if k == 0:
                    shutil.copy(shot, os.path.join(tempfile.gettempdir(), f"web_{label}.png"))
            print(f"view {row['view']}: browser vs our render: splat node {row['splats']:.1f} dB, "
                  f"stream {row['stream']:.1f} dB", file=sys.stderr)
            result["browser"].append(row)
        stream.close()
        splat_server.stop()

    # -- hook with nobody connected ------------------------------------------------------------------
    class FakeTrainer:
        loss_ema = 0.1
        step = None

    hook = TrainingWebPreview(dataset, "127.0.0.1", 0, mode, log=lambda *_: None)
    trainer = FakeTrainer()
    n = 20000
    t0 = time.perf_counter()
    for it in range(n):
        trainer.loss_ema = 1.0 / (it // 25 + 1)          # a new loss every 25 steps
        hook(it, trainer)
    result["hook_us_idle"] = 1e6 * (time.perf_counter() - t0) / n
    hook.viewer.close()
    print(f"hook, nobody connected: {result['hook_us_idle']:.2f} us per step", file=sys.stderr)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
