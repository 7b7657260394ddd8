"""What ``train --preview-web`` costs a run (docs/web.md): the same smoke run without the preview,
with it and nobody connected, and with a client (speaking viser's protocol) that moves its camera
every 0.2 s; runs interleaved A B C C B A to spread the drift of a shared machine. Prints wall
it/s, the process's CPU time, and the frames and wall-time share the preview reports.

    python benchmarks/web_preview_overhead.py [--repeats 2] [--iters 300] [-r 2]
"""

from __future__ import annotations

import argparse
import math
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np


def watcher(port_holder: dict, stop: threading.Event) -> None:
    """A browser stand-in: connects once the port is known, sends a camera orbiting the origin
    every 0.2 s and drains what the server sends."""
    import msgspec
    import viser
    from viser._messages import ViewerCameraMessage
    from websockets.sync.client import connect

    from wgsl_splat.app.web_viewer import matrix_to_quat

    while "port" not in port_holder and not stop.is_set():
        time.sleep(0.05)
    if stop.is_set():
        return
    ws = connect(f"ws://127.0.0.1:{port_holder['port']}", max_size=None,
                 subprotocols=[f"viser-v{viser.__version__}"])
    k = 0
    try:
        while not stop.is_set():
            a = 0.05 * k
            eye = np.array([4.0 * math.sin(a), 0.0, 4.0 * math.cos(a)])
            forward = -eye / 4.0
            down = np.array([0.0, -1.0, 0.0])                 # world +y up
            c2w = np.stack([np.cross(down, forward), down, forward], axis=1)   # OpenCV x, y, z
            q = tuple(matrix_to_quat(c2w))
            msg = ViewerCameraMessage(wxyz=q, position=tuple(eye), fov=0.9, near=0.01, far=100.0,
                                      image_height=240, image_width=320, look_at=(0.0, 0.0, 0.0),
                                      up_direction=(0.0, -1.0, 0.0))
            ws.send(msgspec.msgpack.encode(msg.as_serializable_dict()))
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:
                try:
                    ws.recv(timeout=max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    break
            k += 1
    except Exception:  # noqa: BLE001 - the run ended and closed the connection
        pass
    finally:
        ws.socket.close()


def run(variant: str, iters: int, resolution: int, out: str) -> dict:
    args = [sys.executable, "-m", "wgsl_splat", "train", "--preset", "smoke", "--iters",
            str(iters), "-r", str(resolution), "--out", out, "--overwrite"]
    if variant != "plain":
        args += ["--preview-web", "--port", "0"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    holder, stop = {}, threading.Event()
    thread = None
    if variant == "watched":
        thread = threading.Thread(target=watcher, args=(holder, stop), daemon=True)
        thread.start()
    lines = []
    for line in proc.stdout:
        lines.append(line)
        found = re.search(r"Web preview: http://127\.0\.0\.1:(\d+)", line)
        if found:
            holder["port"] = int(found.group(1))
    proc.wait()
    stop.set()
    if thread:
        thread.join(5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = "".join(lines)
    rate = float(re.search(r"\(([0-9.]+) it/s\), N", text).group(1))
    frames = re.search(r"web preview: (\d+) frames, ([0-9.]+)% of the wall time", text)
    return dict(variant=variant, it_s=rate, cpu=after.ru_utime - before.ru_utime
                + after.ru_stime - before.ru_stime,
                frames=int(frames.group(1)) if frames else 0,
                share=float(frames.group(2)) if frames else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("-r", "--resolution", type=int, default=2)
    args = ap.parse_args()
    order = ["plain", "idle", "watched", "watched", "idle", "plain"] * args.repeats
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in order:
            r = run(variant, args.iters, args.resolution, f"{tmp}/run")
            results.append(r)
            print(f"{r['variant']:8s} {r['it_s']:6.2f} it/s  cpu {r['cpu']:6.1f} s  "
                  f"frames {r['frames']:4d}  preview {r['share']:.1f}% of the wall time",
                  file=sys.stderr)
    print("| variant | it/s (median) | CPU s (median) | frames | preview share of wall time |")
    print("|---|---:|---:|---:|---:|")
    for variant in ("plain", "idle", "watched"):
        rows = [r for r in results if r["variant"] == variant]
        med = lambda k: statistics.median(r[k] for r in rows)
        print(f"| {variant} | {med('it_s'):.2f} ({min(r['it_s'] for r in rows):.2f}–"
              f"{max(r['it_s'] for r in rows):.2f}) | {med('cpu'):.1f} | {med('frames'):.0f} | "
              f"{med('share'):.1f} % |")


if __name__ == "__main__":
    main()
