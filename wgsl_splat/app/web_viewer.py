"""Web viewer: ``view MODEL --web`` and ``train --preview-web`` serve a page (viser, the optional
``wgsl_splat[web]`` extra) that shows the model, the dataset's cameras as frusta (click one to look
through it) and, while training, the step, N, it/s and the loss curve.

The splats are not sent to the browser: each browser's camera comes back to the server, which
renders it with our own renderer (the GPU pipeline, or the NumPy reference without an adapter) in
the model's render mode — antialiased or classic, all SH degrees — and streams the image (JPEG)
as the page's background; frusta and GUI are drawn by the page. So the browser shows exactly what
``render`` writes, at the cost of one render per camera move. (viser's own WebGL splat node keeps
colour only (no SH), 8-bit opacity and float16 covariances, and knows neither Mip filter:
docs/web.md has the measurements behind the choice.)

Training: the trainer calls :class:`TrainingWebPreview` after every step. With nobody connected
that is a dictionary lookup and a list append; with a browser connected the renders (and JPEG
encoding) take at most ``budget`` of the wall time (a leaky bucket). Nothing a browser does —
disconnecting mid-frame included — can raise into the training loop: errors become one warning.
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import socket
import threading
import time
from dataclasses import dataclass

import click
import numpy as np

from ..camera import Camera
from ..errors import UserError
from .flags import Flag
from .view_camera import OrbitCamera, capture_up, start_view

INSTALL = "pip install 'wgsl_splat[web]'"
JPEG_QUALITY = 90


HOST = Flag(("--host",), dict(
    default="127.0.0.1", show_default=True,
    help="Web viewer: the address to listen on (0.0.0.0: every interface, to watch from other "
         "machines)."))
PORT = Flag(("--port",), dict(
    type=click.IntRange(0, 65535), default=8080, show_default=True,
    help="Web viewer: the port (0 picks a free one; the address is printed)."))


def import_viser():
    """viser, or one line saying how to install it."""
    try:
        import viser
    except ImportError:
        raise UserError(f"the web viewer needs viser, which is not installed: {INSTALL}") from None
    return viser


def check_port(host: str, port: int) -> None:
    """One clear line if ``host:port`` cannot be listened on (viser would silently move on to the
    next free port, and the printed address would not be the one asked for)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: {exc.strerror or exc}") from None
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as s:
            try:
                s.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise UserError(f"port {port} on {host} is already in use: pass another "
                                    f"--port (--port 0 picks a free one)") from None
                if exc.errno == errno.EADDRNOTAVAIL and family == socket.AF_INET6:
                    continue          # no IPv6 here: viser listens on the IPv4 address
                raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def quat_to_matrix(wxyz) -> np.ndarray:
    w, x, y, z = np.asarray(wxyz, np.float64) / np.linalg.norm(wxyz)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """wxyz of a rotation matrix (Shepperd's method: the largest diagonal term first)."""
    r = np.asarray(r, np.float64)
    t = np.trace(r)
    if t > 0:
        s = 2.0 * math.sqrt(1.0 + t)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = [0.0] * 4
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q = np.array(q)
    return q / np.linalg.norm(q)


def browser_camera(wxyz, position, fov_y: float, width: int, height: int) -> Camera:
    """Our pinhole camera for a viser camera (OpenCV axes: R, t map camera to world; ``fov_y``
    vertical, radians) rendered at ``width`` x ``height``."""
    rot = quat_to_matrix(wxyz)
    w2c = np.eye(4)
    w2c[:3, :3] = rot.T
    w2c[:3, 3] = -rot.T @ np.asarray(position, np.float64)
    f = 0.5 * height / math.tan(0.5 * fov_y)
    return Camera(w2c, f, f, 0.5 * width, 0.5 * height, width, height, name="web")


def view_of(cam: Camera, target_distance: float) -> dict:
    """The viser camera looking through dataset camera ``cam``: position, look-at point ahead,
    up (the image's up, OpenCV -y) and vertical field of view."""
    rot = cam.rotation            # rows: camera axes in world space
    return dict(position=cam.center, look_at=cam.center + rot[2] * target_distance,
                up=-rot[1], fov=2.0 * math.atan(0.5 * cam.height / cam.fy))


FRUSTUM_PIXELS = 1.5          # outline width: thin enough never to hide the model
FRUSTUM_COLOR = (40, 90, 200)
FRUSTUM_SPACING = 0.4         # depth: at most this fraction of the typical gap between cameras
FRUSTUM_EXTENT = 0.05         # ... and of the distance from the cameras to the scene
NEAR_EYE = 2.0                # frusta whose apex is within this many depths of the eye: hidden


def frustum_depth(centers: np.ndarray, points=None) -> float:
    """How deep to draw the camera frusta: a fraction of the median distance from each camera to
    its nearest neighbour (so neighbours' outlines never overlap), and at most a small fraction of
    the distance to the scene (a dense video capture draws them small)."""
    centers = np.asarray(centers, np.float64).reshape(-1, 3)
    middle = (np.median(points, axis=0) if points is not None and len(points)
              else centers.mean(axis=0))
    reach = float(np.median(np.linalg.norm(centers - middle, axis=1))) if len(centers) else 0.0
    depth = FRUSTUM_EXTENT * reach
    if len(centers) > 1:
        nearest = np.empty(len(centers))
        for lo in range(0, len(centers), 256):          # blocks: N x N gaps need not fit at once
            gaps = np.linalg.norm(centers[lo:lo + 256, None] - centers[None], axis=2)
            gaps[np.arange(len(gaps)), np.arange(lo, lo + len(gaps))] = np.inf
            nearest[lo:lo + 256] = gaps.min(axis=1)
        spacing = float(np.median(nearest))
        if spacing > 0:
            depth = min(depth, FRUSTUM_SPACING * spacing) if depth > 0 else FRUSTUM_SPACING * spacing
    return depth if depth > 0 else 0.1


def near_eye(centers: np.ndarray, depth: float, eye) -> np.ndarray:
    """Which frusta (apexes ``centers``, ``depth`` deep) are too near ``eye`` to draw: the one the
    view looks through and those close enough to fill much of it."""
    return np.linalg.norm(np.asarray(centers) - np.asarray(eye, np.float64), axis=1) \
        < NEAR_EYE * depth


class _Client:
    def __init__(self, handle) -> None:
        self.handle = handle
        self.dirty = True
        self.last_render = -math.inf
        self.frames = 0
        self.frusta: list = []          # this browser's dataset-camera outlines
        self.shown = np.zeros(0, bool)
        self.frusta_lock = threading.Lock()


@dataclass(frozen=True)
class WebScene:
    """What the page shows besides the model: the dataset's ``cameras`` as clickable frusta, the
    first view looking through ``cameras[initial]``, or at ``points`` from outside when there are
    no cameras."""

    cameras: tuple = ()
    points: np.ndarray | None = None
    initial: int = 0


class WebViewer:
    """A viser server streaming ``render(camera) -> (H, W, 3)`` images to every browser, showing
    ``scene`` (:class:`WebScene`). Not thread-safe on the rendering side: call
    :meth:`render_due` from the thread that owns the renderer."""

    RENDER_SCALE = 1.0      # the render-scale slider's first position

    def __init__(self, host: str, port: int, *, title: str, mode: str,
                 scene: WebScene = WebScene(), log=print, max_pixels: int = 1280 * 720,
                 announce: bool = False) -> None:
        viser = import_viser()
        check_port(host, port)
        self.log = log
        self.announce = announce        # a line when a browser comes, gets its first frame, goes
        self.mode = mode
        self.cameras = list(scene.cameras)
        self.max_pixels = int(max_pixels)
        self._clients: dict[int, _Client] = {}
        self._lock = threading.Lock()
        self.wake = threading.Event()
        self.frames = 0
        self.render_seconds = 0.0
        self._warned: set[str] = set()
        with contextlib.redirect_stdout(io.StringIO()):     # viser's banner: we print our own
            self.server = viser.ViserServer(host=host, port=port, label=title, verbose=False)
        self.port = self.server.get_port()
        if port and self.port != port:   # taken between our check and viser's bind
            self.close()
            raise UserError(f"port {port} on {host} is already in use: pass another --port "
                            f"(--port 0 picks a free one)")
        self.host = host
        self.server.gui.configure_theme(control_layout="floating", show_share_button=False,
                                        show_logo=False)
        self._setup_scene(scene.points, scene.initial)
        self.info = self.server.gui.add_markdown(f"render mode: **{mode}** (rendered by wgsl_splat)")
        self.scale = self.server.gui.add_slider("render scale", 0.1, 1.0, 0.05, self.RENDER_SCALE,
                                                hint="Resolution of the streamed image relative "
                                                     "to the browser's canvas")
        self.scale.on_update(lambda _event: self.mark_all())
        self.server.on_client_connect(self._connect)
        self.server.on_client_disconnect(self._disconnect)

    # -- addresses and lifetime -------------------------------------------------------------------
    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
            self.server.stop()                  # (viser prints "Server stopped")

    @property
    def connected(self) -> int:
        return len(self._clients)

    # -- scene --------------------------------------------------------------------------------------
    def _setup_scene(self, points, initial: int) -> None:
        cams = self.cameras
        self._show = None
        if cams:
            first = min(max(initial, 0), len(cams) - 1)
            start = cams[first]
            orbit = start_view(cams, [first], points if points is not None else ())[0]
            self._target_distance = orbit.distance
            self._centers = np.array([c.center for c in cams])
            self._frustum_depth = frustum_depth(self._centers, points)
            self._start_eye = start.center
            self.server.scene.set_up_direction(tuple(capture_up(cams)))
            view = view_of(start, self._target_distance)
            init = self.server.initial_camera
            init.fov = view["fov"]
            init.position = tuple(view["position"])
            init.look_at = tuple(view["look_at"])
            init.up = tuple(view["up"])
            self._show = self.server.gui.add_checkbox(
                f"show the {len(cams)} dataset cameras", True,
                hint="Click a camera to look through it")
            self._show.on_update(lambda _event: self._refresh_all_frusta())
        elif points is not None and len(points):
            orbit = OrbitCamera.for_points(points)      # the window viewer's first view
            self.server.scene.set_up_direction(tuple(orbit.up))   # up in the image
            init = self.server.initial_camera
            init.fov = math.radians(orbit.fov_y_deg)
            init.position = tuple(orbit.eye)
            init.look_at = tuple(orbit.target)
            init.up = tuple(orbit.up)

    # -- frusta: each browser its own, those near its eye hidden ------------------------------------
    def _add_frusta(self, entry: "_Client") -> None:
        """The dataset cameras as thin outlines in ``entry``'s scene (per browser: which ones are
        near the eye depends on its camera)."""
        depth = self._frustum_depth
        for i, cam in enumerate(self.cameras):
            frustum = entry.handle.scene.add_camera_frustum(
                f"/cameras/{i:04d}", fov=2.0 * math.atan(0.5 * cam.height / cam.fy),
                aspect=cam.width / cam.height, scale=depth, thickness=FRUSTUM_PIXELS,
                thickness_units="screen", color=FRUSTUM_COLOR,
                wxyz=tuple(matrix_to_quat(cam.rotation.T)), position=tuple(cam.center),
                visible=False, cast_shadow=False, receive_shadow=False)
            frustum.on_click(lambda event, i=i: self.look_through(event.client, i))
            entry.frusta.append(frustum)
        entry.shown = np.zeros(len(self.cameras), bool)
        self._refresh_frusta(entry, self._start_eye)

    def _refresh_frusta(self, entry: "_Client", eye) -> None:
        shown = self._show is not None and bool(self._show.value)
        want = shown & ~near_eye(self._centers, self._frustum_depth, eye)
        with entry.frusta_lock:         # camera updates and the checkbox come on viser's threads
            for i in np.flatnonzero(want != entry.shown):
                entry.frusta[i].visible = bool(want[i])
            entry.shown = want

    def _refresh_all_frusta(self) -> None:
        for entry in list(self._clients.values()):
            with contextlib.suppress(Exception):         # a browser gone meanwhile
                self._refresh_frusta(entry, np.array(entry.handle.camera.position))

    def _camera_moved(self, client_id: int) -> None:
        entry = self._clients.get(client_id)
        if entry is None:
            return
        if entry.frusta:
            try:
                self._refresh_frusta(entry, np.array(entry.handle.camera.position))
            except Exception as exc:  # noqa: BLE001 - the frusta must never stop the frames
                self._warn("frusta", f"could not update the camera frusta: {exc}")
        self.mark(client_id)

    def look_through(self, client, i: int) -> None:
        """Point ``client``'s camera through dataset camera ``i``."""
        try:
            view = view_of(self.cameras[i], self._target_distance)
            with client.atomic():
                client.camera.fov = view["fov"]
                client.camera.position = tuple(view["position"])
                client.camera.look_at = tuple(view["look_at"])
                client.camera.up_direction = tuple(view["up"])
        except Exception as exc:  # noqa: BLE001 - a click must never take the server down
            self._warn("click", f"could not move the camera: {exc}")

    # -- clients ------------------------------------------------------------------------------------
    def _connect(self, client) -> None:
        entry = _Client(client)
        if self.cameras:
            self._add_frusta(entry)
        with self._lock:
            self._clients[client.client_id] = entry
        client.camera.on_update(lambda _cam, cid=client.client_id: self._camera_moved(cid))
        self.wake.set()
        if self.announce:
            self.log(f"browser {client.client_id} connected ({self.connected} now)")

    def _disconnect(self, client) -> None:
        with self._lock:
            gone = self._clients.pop(client.client_id, None)
        if self.announce and gone is not None:
            self.log(f"browser {client.client_id} left ({self.connected} now)")

    def mark(self, client_id: int) -> None:
        entry = self._clients.get(client_id)
        if entry is not None:
            entry.dirty = True
            self.wake.set()

    def mark_all(self) -> None:
        for entry in list(self._clients.values()):
            entry.dirty = True
        self.wake.set()

    def _warn(self, key: str, msg: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.log(f"Warning: web viewer: {msg}")

    def frame_camera(self, handle) -> Camera | None:
        """The camera to render for a browser: its pose and field of view at its canvas size
        times the render scale, at most ``max_pixels``; None until the browser has reported."""
        cam = handle.camera
        try:
            width, height = int(cam.image_width), int(cam.image_height)
            wxyz, position, fov = np.array(cam.wxyz), np.array(cam.position), float(cam.fov)
        except AssertionError:          # viser: no camera message from this browser yet
            return None
        if width <= 0 or height <= 0 or not np.isfinite(fov) or fov <= 0:
            return None
        scale = min(float(self.scale.value), math.sqrt(self.max_pixels / (width * height)))
        w, h = max(1, round(width * scale)), max(1, round(height * scale))
        return browser_camera(wxyz, position, fov, w, h)

    def render_due(self, render, refresh: float | None = None, allow=lambda: True) -> int:
        """Render and send a frame to every browser whose camera moved (or, with ``refresh``,
        whose last frame is older than that many seconds) while ``allow()``; returns frames
        sent. A browser that fails (closed mid-frame) is dropped, never raised."""
        sent = 0
        for cid, entry in list(self._clients.items()):
            now = time.perf_counter()
            due = entry.dirty or (refresh is not None and now - entry.last_render >= refresh)
            if not due or not allow():
                continue
            camera = self.frame_camera(entry.handle)
            if camera is None:
                continue
            entry.dirty = False
            t0 = time.perf_counter()
            try:
                image = render(camera)
                entry.handle.scene.set_background_image(np.clip(image, 0.0, 1.0), format="jpeg",
                                                        jpeg_quality=JPEG_QUALITY)
            except Exception as exc:  # noqa: BLE001 - a browser must never stop the caller
                if cid in self._clients:
                    self._warn(f"render:{type(exc).__name__}", f"{type(exc).__name__}: {exc}")
                continue
            finally:
                self.render_seconds += time.perf_counter() - t0
            if self.announce and entry.frames == 0:
                self.log(f"browser {cid}: first frame, {camera.width}x{camera.height}")
            entry.last_render = time.perf_counter()
            entry.frames += 1
            self.frames += 1
            sent += 1
        return sent

    def serve(self, render) -> None:
        """Render for the browsers until Ctrl-C (``view --web``)."""
        try:
            while True:
                self.wake.wait(0.5)
                self.wake.clear()
                self.render_due(render)
        except KeyboardInterrupt:
            pass
        finally:
            self.close()


class TrainingWebPreview:
    """``train --preview-web``: the trainer's ``on_step`` hook. The server starts with the run
    (a port in use stops the run before step 1); frames are rendered between steps from the
    parameters being trained, within ``budget`` of the wall time, only while a browser is
    connected."""

    def __init__(self, dataset, host: str, port: int, mode: str, log, *, budget: float = 0.1,
                 refresh: float = 0.5, max_credit: float = 1.0) -> None:
        cams = list(dataset.cameras)
        test = list(getattr(dataset, "test_indices", []) or [])
        self.viewer = WebViewer(host, port, title="wgsl_splat training", mode=mode,
                                scene=WebScene(cams, initial=test[0] if test else 0), log=log)
        self.log = log
        self.budget, self.refresh, self.max_credit = budget, refresh, max_credit
        gui = self.viewer.server.gui
        self.status = gui.add_markdown("waiting for the first step")
        import viser.uplot as uplot

        self._steps: list[int] = []
        self._losses: list[float] = []
        self.curve = gui.add_uplot(
            (np.zeros(1), np.zeros(1)),
            (uplot.Series(label="step"), uplot.Series(label="loss", stroke="#1f77b4", width=2)),
            title="training loss (EMA)", aspect=1.6)
        self._last_loss = None
        self._credit = 0.0
        self._t_last = None
        self._t0 = time.perf_counter()
        self._rate = (0, self._t0)      # (step, time) of the last it/s measurement
        self._it_per_s = 0.0
        self._last_status = -math.inf
        self._was_connected = False
        self.failures = 0
        self.overhead_seconds = 0.0
        log(f"Web preview: {self.viewer.url} ({mode}; renders take at most "
            f"{100 * budget:.0f}% of the run while a browser is connected)")

    def __call__(self, it: int, trainer) -> None:
        try:
            self._on_step(it, trainer)
        except Exception as exc:  # noqa: BLE001 - the run matters more than the preview
            self.failures += 1
            if self.failures == 1:
                self.log(f"Warning: web preview: {type(exc).__name__}: {exc}; training continues")

    def _on_step(self, it: int, trainer) -> None:
        now = time.perf_counter()
        loss = trainer.loss_ema
        if loss is not None and loss != self._last_loss:   # new losses arrive in batches
            self._steps.append(it)
            self._losses.append(float(loss))
            self._last_loss = loss
        if not self.viewer.connected:          # nobody watching: nothing more to do
            self._was_connected = False
            self._t_last = now
            return
        t_start = now
        if self._t_last is not None:
            self._credit = min(self.max_credit, self._credit + self.budget * (now - self._t_last))
        self._t_last = now
        if not self._was_connected and getattr(trainer.step, "renderer", True) is None:
            self.viewer.max_pixels = 320 * 240      # the NumPy path: seconds per megapixel
        if not self._was_connected or now - self._last_status >= 1.0:
            self._update_status(it, trainer, now)
            self._was_connected = True
        sh = trainer.active_sh_degree(it)
        before = self.viewer.render_seconds
        self.viewer.render_due(lambda cam: trainer.step.render(cam, sh), refresh=self.refresh,
                               allow=lambda: self._credit > self.viewer.render_seconds - before)
        self._credit -= self.viewer.render_seconds - before
        self.overhead_seconds += time.perf_counter() - t_start

    def _update_status(self, it: int, trainer, now: float) -> None:
        step0, t0 = self._rate
        if now - t0 >= 1.0:
            self._it_per_s = (it - step0) / (now - t0)
            self._rate = (it, now)
        total = trainer.cfg.iters
        loss = "…" if trainer.loss_ema is None else f"{trainer.loss_ema:.4f}"
        self.status.content = (f"**step** {it} / {total} · **N** {trainer.step.num_gaussians:,} · "
                               f"**{self._it_per_s:.2f} it/s** · loss {loss}")
        if self._steps:
            self.curve.data = (np.array(self._steps, np.float64),
                               np.array(self._losses, np.float64))
        self._last_status = now

    def close(self) -> None:
        total = time.perf_counter() - self._t0
        self.log(f"web preview: {self.viewer.frames} frames, "
                 f"{100 * self.overhead_seconds / max(total, 1e-9):.1f}% of the wall time")
        self.viewer.close()


class chain_hooks:
    """Two ``on_step(iteration, trainer)`` hooks called in turn (either may be None), closed
    together."""

    def __new__(cls, first, second):
        if first is None or second is None:
            return first if second is None else second
        return super().__new__(cls)

    def __init__(self, first, second) -> None:
        self.hooks = (first, second)

    def __call__(self, it: int, trainer) -> None:
        for hook in self.hooks:
            hook(it, trainer)

    def close(self) -> None:
        for hook in self.hooks:
            hook.close()
