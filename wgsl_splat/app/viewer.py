"""Interactive preview window: a glfw window presenting the project's own GPU forward render.

The window is opened with glfw (no client API) and presented through wgpu-py's canvas support
(``wgpu.gpu.get_canvas_context`` with rendercanvas's glfw present info). Each frame renders the
model with :class:`~wgsl_splat.gpu.renderer.GpuRenderer` into its device ``image`` buffer and a
fullscreen pass (``shaders/present.wgsl``) reads that buffer straight into the surface texture:
no host round trip of the image. The viewer polls glfw events itself (:meth:`Viewer.frame`), so
the same window serves ``view`` (its own loop) and ``train --preview`` (polled between training
steps, drawing the training step's own renderer, i.e. the parameters being trained).

Controls: left drag orbit, right drag (or shift + left drag) pan, wheel zoom, W/A/S/D/Q/E fly,
R reset view, N / B next / previous dataset camera, P screenshot (PNG), Esc close.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from ..atomic_io import save_png
from .view_camera import OrbitCamera, start_view


class ViewerError(RuntimeError):
    """The window cannot be opened (no display, glfw cannot start); the message says why."""


def check_display() -> None:
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        raise ViewerError("no display: neither DISPLAY nor WAYLAND_DISPLAY is set. On a headless "
                          "machine run under xvfb-run, or write images with `wgsl_splat render`.")


def window_refused(ctx) -> str | None:
    """Why a window cannot present from ``ctx``'s adapter (None: it can)."""
    if ctx.backend == "OpenGL":   # measured: wgpu 0.32 aborts in the surface's configure()
        return ("the window cannot present from wgpu's OpenGL adapter (wgpu aborts the process "
                "configuring its surface); a Vulkan or Metal adapter can (Linux: "
                "mesa-vulkan-drivers)")
    return None


def _wgpu():
    import wgpu  # noqa: PLC0415

    return wgpu


class Viewer:
    """A window showing what ``renderer`` renders from an :class:`OrbitCamera` (on the renderer's
    device, ``renderer.ctx``)."""

    FLY_SPEED = 0.6           # orbit distances per second
    ORBIT_SPEED = 0.006       # radians per pixel dragged
    PAN_SPEED = 0.0015        # orbit distances per pixel dragged

    def __init__(self, renderer, orbit: OrbitCamera, *, size=(960, 720), title="wgsl_splat",
                 cameras=(), background=(0.0, 0.0, 0.0), active_sh_degree: int | None = None,
                 screenshot_dir: str = ".") -> None:
        ctx = renderer.ctx
        check_display()
        refused = window_refused(ctx)
        if refused:
            raise ViewerError(refused)
        try:
            import glfw  # noqa: PLC0415
        except ImportError as exc:   # the glfw shared library itself is missing
            raise ViewerError(f"glfw is not available ({exc})") from None
        self.glfw = glfw
        if not glfw.init():
            raise ViewerError(f"glfw could not start: {glfw.get_error()[1] or 'unknown error'}")
        glfw.window_hint(glfw.CLIENT_API, glfw.NO_API)
        glfw.window_hint(glfw.RESIZABLE, glfw.TRUE)
        self.window = glfw.create_window(int(size[0]), int(size[1]), title, None, None)
        if not self.window:
            raise ViewerError(f"glfw could not open a window: {glfw.get_error()[1] or 'unknown error'}")
        self.ctx = ctx
        self.renderer = renderer
        self.orbit = orbit
        self.cameras = list(cameras)
        self.camera_index = self._home_index = -1    # the dataset camera looked through, or -1
        self.background = tuple(background)
        self.active_sh_degree = active_sh_degree
        self.title = title
        self.screenshot_dir = screenshot_dir
        self.closed = False
        self.frames = 0
        self.frame_ms = 0.0
        self.last_capture: np.ndarray | None = None
        self._capture_next = False
        self._screenshot_path: str | None = None
        self._drag: str | None = None
        self._cursor = (0.0, 0.0)
        self._held: set = set()
        self._last_time = time.perf_counter()
        self._setup_surface()
        self._install_callbacks()

    def set_home_camera(self, index: int) -> None:
        """The home view looks through dataset camera ``index`` (the title names it, R returns
        to it)."""
        self.camera_index = self._home_index = index

    # -- surface and present pipeline ----------------------------------------------------------------
    def _setup_surface(self) -> None:
        from rendercanvas.glfw import get_glfw_present_info  # noqa: PLC0415

        from ..gpu.kernels import PRESENT  # noqa: PLC0415
        from ..gpu.shaders import struct_dtype  # noqa: PLC0415

        wgpu = _wgpu()
        device = self.ctx.device
        self.context = wgpu.gpu.get_canvas_context(get_glfw_present_info(self.window))
        formats = self.context._get_capabilities(self.ctx.adapter)["formats"]
        # A non-sRGB format: the rendered values are display values (as written to PNGs).
        plain = [f for f in formats if not f.endswith("-srgb")]
        self.format = "bgra8unorm" if "bgra8unorm" in formats else (plain or formats)[0]
        usages = self.context._get_capabilities(self.ctx.adapter)["usages"]
        self.usage = wgpu.TextureUsage.RENDER_ATTACHMENT
        if usages & wgpu.TextureUsage.COPY_SRC:       # screenshots read the presented texture
            self.usage |= wgpu.TextureUsage.COPY_SRC
        self._surface_size = (0, 0)
        src = PRESENT.variant().source()
        module = device.create_shader_module(code=src.code, label="present.wgsl")
        self._slots = {var: b for _, b, _, _, var in src.bindings}
        self._layout = device.create_bind_group_layout(entries=[
            {"binding": b, "visibility": wgpu.ShaderStage.FRAGMENT, "buffer": {"type": kind}}
            for _, b, kind, _, _ in src.bindings])
        self._pipeline = device.create_render_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=[self._layout]),
            vertex={"module": module, "entry_point": "vs_main"},
            fragment={"module": module, "entry_point": "fs_main", "targets": [{"format": self.format}]},
            primitive={"topology": "triangle-list"})
        self._present = np.zeros((), struct_dtype(src, "PresentParams"))
        self._params = device.create_buffer(size=self._present.nbytes,
                                            usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self._bind_group = None
        self._bound_image = None

    def _install_callbacks(self) -> None:
        g = self.glfw
        g.set_mouse_button_callback(self.window, self._on_mouse_button)
        g.set_cursor_pos_callback(self.window, self._on_cursor_pos)
        g.set_scroll_callback(self.window, self._on_scroll)
        g.set_key_callback(self.window, self._on_key)

    # -- input (glfw callbacks; tests drive them directly) -------------------------------------------
    def _on_mouse_button(self, window, button, action, mods) -> None:
        g = self.glfw
        if action == g.PRESS:
            pan = button in (g.MOUSE_BUTTON_RIGHT, g.MOUSE_BUTTON_MIDDLE) or (mods & g.MOD_SHIFT)
            self._drag = "pan" if pan else "orbit"
            self._cursor = g.get_cursor_pos(window)
        elif action == g.RELEASE:
            self._drag = None

    def _on_cursor_pos(self, window, x, y) -> None:
        dx, dy = x - self._cursor[0], y - self._cursor[1]
        self._cursor = (x, y)
        if self._drag == "orbit":
            self.orbit.orbit(-dx * self.ORBIT_SPEED, dy * self.ORBIT_SPEED)
        elif self._drag == "pan":
            self.orbit.pan(-dx * self.PAN_SPEED, dy * self.PAN_SPEED)

    def _on_scroll(self, window, dx, dy) -> None:
        self.orbit.zoom(dy)

    def _on_key(self, window, key, scancode, action, mods) -> None:
        g = self.glfw
        fly = {g.KEY_W, g.KEY_A, g.KEY_S, g.KEY_D, g.KEY_Q, g.KEY_E}
        if key in fly:
            if action == g.PRESS:
                self._held.add(key)
            elif action == g.RELEASE:
                self._held.discard(key)
            return
        if action != g.PRESS:
            return
        if key == g.KEY_ESCAPE:
            g.set_window_should_close(window, True)
        elif key == g.KEY_R:
            self.orbit.reset()
            self.camera_index = self._home_index
        elif key in (g.KEY_N, g.KEY_B, g.KEY_RIGHT, g.KEY_LEFT) and self.cameras:
            step = 1 if key in (g.KEY_N, g.KEY_RIGHT) else -1
            self.camera_index = (self.camera_index + step) % len(self.cameras)
            cam = self.cameras[self.camera_index]
            home = self.orbit._home
            self.orbit = OrbitCamera.from_camera(cam, max(self.orbit.distance, 1e-3), self.orbit.up)
            self.orbit._home = home
        elif key == g.KEY_P:
            self.request_screenshot()

    def _apply_held_keys(self, dt: float) -> None:
        g = self.glfw
        if not self._held:
            return
        v = self.FLY_SPEED * dt
        f = (g.KEY_W in self._held) - (g.KEY_S in self._held)
        r = (g.KEY_D in self._held) - (g.KEY_A in self._held)
        u = (g.KEY_E in self._held) - (g.KEY_Q in self._held)
        self.orbit.fly(f * v, r * v, u * v)

    # -- frames --------------------------------------------------------------------------------------
    def request_screenshot(self, path: str | None = None) -> None:
        """Save the next presented frame as a PNG (default: screenshot_<n>.png in screenshot_dir)."""
        if path is None:
            path = os.path.join(self.screenshot_dir, f"screenshot_{int(time.time())}_{self.frames}.png")
        self._screenshot_path = path
        self._capture_next = True

    def capture_next_frame(self) -> None:
        """Keep the next presented frame in :attr:`last_capture` ((H, W, 3) uint8, RGB)."""
        self._capture_next = True

    def frame(self, draw: bool = True) -> bool:
        """Process window events, move the camera, and (with ``draw``) render and present one frame.
        Returns False once the window is closed."""
        if self.closed:
            return False
        g = self.glfw
        g.poll_events()
        if g.window_should_close(self.window):
            self.close()
            return False
        now = time.perf_counter()
        self._apply_held_keys(min(now - self._last_time, 0.1))
        self._last_time = now
        if draw:
            self.draw()
        return True

    def draw(self) -> None:
        wgpu = _wgpu()
        w, h = self.glfw.get_framebuffer_size(self.window)
        if w <= 0 or h <= 0:      # minimised
            return
        t0 = time.perf_counter()
        if (w, h) != self._surface_size:
            self.context.set_physical_size(w, h)
            self.context.configure(device=self.ctx.device, format=self.format, usage=self.usage)
            self._surface_size = (w, h)
        cam = self.orbit.camera(w, h)
        r = self.renderer
        with self.ctx.guard("rendering the preview"):
            r.render(cam, self.background, readback=False, active_sh_degree=self.active_sh_degree)
            image = r.pool["image"]
            if image is not self._bound_image:
                self._bind_group = self.ctx.device.create_bind_group(layout=self._layout, entries=[
                    {"binding": self._slots["pp"], "resource": {"buffer": self._params}},
                    {"binding": self._slots["image"], "resource": {"buffer": image}}])
                self._bound_image = image
            self._present["size"][:2] = (w, h)
            self.ctx.queue.write_buffer(self._params, 0, self._present.reshape(1).view(np.uint8))
            texture = self.context.get_current_texture()
            enc = self.ctx.device.create_command_encoder(label="present")
            rp = enc.begin_render_pass(color_attachments=[{
                "view": texture.create_view(), "load_op": "clear", "store_op": "store",
                "clear_value": (0.0, 0.0, 0.0, 1.0)}])
            rp.set_pipeline(self._pipeline)
            rp.set_bind_group(0, self._bind_group)
            rp.draw(3)
            rp.end()
            capture = self._capture_next and bool(self.usage & wgpu.TextureUsage.COPY_SRC)
            if capture:
                bpr = -(-4 * w // 256) * 256
                staging = self.ctx.device.create_buffer(
                    size=bpr * h, usage=wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.MAP_READ)
                enc.copy_texture_to_buffer({"texture": texture},
                                           {"buffer": staging, "bytes_per_row": bpr, "rows_per_image": h},
                                           (w, h, 1))
            self.ctx.queue.submit([enc.finish()])
            self.context.present()
        if capture:
            staging.map_sync("READ")
            raw = np.frombuffer(staging.read_mapped(), np.uint8).reshape(h, bpr)[:, :4 * w]
            staging.unmap()
            px = raw.reshape(h, w, 4)
            self.last_capture = (px[..., [2, 1, 0]] if self.format.startswith("bgra") else px[..., :3]).copy()
            self._capture_next = False
            if self._screenshot_path:
                save_png(self._screenshot_path, self.last_capture.astype(np.float32) / 255.0)
                print(f"screenshot saved to {self._screenshot_path}")
                self._screenshot_path = None
        elif self._screenshot_path:   # the surface cannot be copied: save the rendered image
            save_png(self._screenshot_path, np.clip(r.render(cam, self.background), 0, 1))
            self._screenshot_path, self._capture_next = None, False
        self.frames += 1
        self.frame_ms = 1000.0 * (time.perf_counter() - t0)
        name = f" — {self.cameras[self.camera_index].name}" if self.camera_index >= 0 else ""
        self.glfw.set_window_title(self.window, f"{self.title} — {r.num} Gaussians — "
                                                f"{self.frame_ms:.1f} ms/frame — {w}x{h}{name}")

    def run(self, max_frames: int | None = None) -> None:
        """Loop until the window is closed (or ``max_frames`` frames were drawn)."""
        while self.frame():
            if max_frames is not None and self.frames >= max_frames:
                break
        self.close()

    def close(self) -> None:
        """Close the window (glfw itself stays initialised until the process ends: terminating and
        re-initialising it in one process gave X BadRequest errors from lavapipe's presentation
        code, which Xlib answers by exiting the process)."""
        if not self.closed:
            self.closed = True
            # Release the surface before its window (and display connection) goes away: a surface
            # released later by the garbage collector would touch a dead X connection.
            try:
                self.context.unconfigure()
            except Exception:  # noqa: BLE001  (never configured, or already gone)
                pass
            self.context = None
            self._bind_group = self._bound_image = None
            self.glfw.destroy_window(self.window)


class TrainingPreview:
    """``train --preview``: polls the window after every step, redraws only while the time spent
    drawing stays under ``budget`` of the training time (and at most ``max_fps`` frames per second),
    so the run slows by at most that fraction. Closing the window ends the preview, not the run."""

    def __init__(self, step, dataset, *, budget: float = 0.1, max_fps: float = 30.0,
                 size=(800, 600), log=print) -> None:
        cams = list(dataset.cameras)
        orbit, first = start_view(cams, dataset.train_indices, step.get_model().means)
        self.viewer = Viewer(step.renderer, orbit, size=size, title="wgsl_splat training",
                             cameras=cams, background=step.background)
        self.viewer.set_home_camera(first)
        self.budget = budget
        self.min_interval = 1.0 / max_fps
        self.log = log
        self.draw_seconds = 0.0
        self.poll_seconds = 0.0
        self.t0 = time.perf_counter()
        self.last_draw = -math.inf

    def on_step(self, it: int, trainer) -> None:
        if self.viewer.closed:
            return
        t = time.perf_counter()
        elapsed = t - self.t0
        train_time = elapsed - self.draw_seconds - self.poll_seconds
        draw = (self.draw_seconds <= self.budget * train_time and t - self.last_draw >= self.min_interval)
        self.viewer.active_sh_degree = trainer.active_sh_degree(it)
        alive = self.viewer.frame(draw=False)
        self.poll_seconds += time.perf_counter() - t
        if alive and draw:
            t1 = time.perf_counter()
            self.viewer.draw()
            self.last_draw = time.perf_counter()
            self.draw_seconds += self.last_draw - t1
        if not alive:
            self.log(f"preview window closed at step {it}; training continues")

    @property
    def overhead(self) -> float:
        """Fraction of the wall time spent on the preview so far."""
        total = time.perf_counter() - self.t0
        return (self.draw_seconds + self.poll_seconds) / total if total > 0 else 0.0

    def close(self) -> None:
        self.viewer.close()
