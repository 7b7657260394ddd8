"""The first frame of both viewers, as a person opening a model sees it (issue 34).

    python benchmarks/viewer_first_frames.py MODEL.ply --out DIR [--data SCENE] [--photo IMG]
        [--size 640x480] [--background R,G,B]

Writes ``DIR/window.png`` (``view MODEL --screenshot`` under Xvfb), ``DIR/web.png`` (``view MODEL
--web`` opened in headless chromium, no camera in the URL: the page's own start) and
``DIR/first_frames.png``: the photo (``--photo``) when given, then the two frames side by side at
one height. Without ``--data`` the viewers find the cameras that travel with the model (the run's
``cameras.json``), as ``view MODEL`` does for anyone who receives it.

Needs ``xvfb-run``, ``node``, Debian's ``chromium`` and playwright-core (``.ci/run`` installs it into
``.ci/node``; or set ``WGSL_SPLAT_NODE_TOOLS``).
"""

from __future__ import annotations

import argparse
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
NODE_TOOLS = Path(os.environ.get("WGSL_SPLAT_NODE_TOOLS", ROOT / ".ci" / "node"))


def view(*args: str) -> list[str]:
    return [sys.executable, "-m", "wgsl_splat", "view", *args]


def window_frame(model: str, flags: list[str], out: Path) -> None:
    subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1280x1024x24",
                    *view(model, *flags, "--screenshot", str(out))], check=True, cwd=ROOT,
                   timeout=600)


def wait_for(proc: subprocess.Popen, pattern: str, timeout: float) -> re.Match:
    end, seen = time.time() + timeout, []
    while time.time() < end:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise RuntimeError(f"no line matching {pattern!r} from the web viewer:\n{''.join(seen)}")


def web_frame(model: str, flags: list[str], out: Path, width: int, height: int) -> None:
    pw = NODE_TOOLS / "node_modules" / "playwright-core"
    if not pw.is_dir():
        sys.exit(f"playwright-core is not in {NODE_TOOLS}: npm install --prefix {NODE_TOOLS} "
                 f"playwright-core")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    server = subprocess.Popen(view(model, *flags, "--web", "--port", "0"), cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready = out.with_suffix(".ready")
    ready.unlink(missing_ok=True)
    try:
        url = wait_for(server, r"Web viewer: (http://127\.0\.0\.1:\d+)", 300).group(1)
        browser = subprocess.Popen(
            ["node", str(ROOT / "tests" / "web" / "screenshot.mjs"), str(pw),
             shutil.which("chromium") or "chromium", url + "/", str(out), str(width), str(height),
             "180", str(ready)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(server, r"browser \d+: first frame", 300)
        ready.touch()
        log = browser.communicate(timeout=300)[0]
        if browser.returncode:
            raise RuntimeError(f"the browser script failed:\n{log}")
    finally:
        ready.unlink(missing_ok=True)
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()


def side_by_side(paths: list[Path], out: Path, height: int = 360) -> None:
    import imageio.v3 as iio
    from PIL import Image

    tiles = []
    for p in paths:
        im = Image.open(p).convert("RGB")
        tiles.append(np.asarray(im.resize((round(im.width * height / im.height), height),
                                          Image.LANCZOS)))
    gap = np.full((height, 8, 3), 255, np.uint8)
    row = [tiles[0]]
    for t in tiles[1:]:
        row += [gap, t]
    iio.imwrite(out, np.concatenate(row, axis=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=None, help="view --data (default: the model's cameras)")
    ap.add_argument("--photo", default=None, help="a photo to put first in the composite")
    ap.add_argument("--size", default="640x480", help="the browser page's size")
    ap.add_argument("--background", default=None, help="view --background (r,g,b in [0,1])")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    flags = (["--data", args.data] if args.data else []) + (
        ["--background", args.background] if args.background else [])
    width, height = (int(v) for v in args.size.lower().split("x"))
    window_frame(args.model, flags, out / "window.png")
    web_frame(args.model, flags, out / "web.png", width, height)
    side_by_side(([Path(args.photo)] if args.photo else []) + [out / "window.png", out / "web.png"],
                 out / "first_frames.png")
    print(f"wrote {out / 'window.png'}, {out / 'web.png'}, {out / 'first_frames.png'}")


if __name__ == "__main__":
    main()
