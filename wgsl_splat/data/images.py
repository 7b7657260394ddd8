"""Image primitives for dataset loading: decoding, exact area resize, lens undistortion and the
on-disk cache of processed images. NumPy only (Pillow, which imageio installs, for file I/O)."""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["IMAGE_EXTENSIONS", "ImageReadError", "Distortion", "Fisheye", "FisheyeError",
           "fisheye_view", "fisheye_kept_fraction", "ImageCache", "image_has_alpha", "read_image",
           "read_image_size", "read_mask", "resize_area", "edge_pixels", "undistort_image",
           "max_outside_pixels", "to_u8", "user_cache_root", "is_writable_dir"]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


class ImageReadError(ValueError):
    """An image file cannot be read or decoded (one readable line)."""


def read_image_size(path) -> tuple[int, int]:
    """``(width, height)`` from the file header, without decoding the pixels."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except Exception as exc:  # PIL raises many types for bad files
        raise ImageReadError(f"cannot read image {path}: {reason(exc)}") from None


def _has_alpha(im) -> bool:
    return im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info


def image_has_alpha(path) -> bool:
    """Whether the file stores an alpha channel (or a transparency key), from its header."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return _has_alpha(im)
    except Exception as exc:  # PIL raises many types for bad files
        raise ImageReadError(f"cannot read image {path}: {reason(exc)}") from None


def read_image(path) -> np.ndarray:
    """Decode to float32 in [0,1], shape (H,W,3) or (H,W,4) (straight alpha); grey becomes RGB.

    Pixels are used as stored (EXIF orientation is not applied, as COLMAP does not either).
    """
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in ("I;16", "I;16B", "I;16L", "I"):
                arr = np.asarray(im, dtype=np.float32) / 65535.0
            elif im.mode == "F":
                arr = np.asarray(im, dtype=np.float32)
            else:
                alpha = _has_alpha(im)
                arr = np.asarray(im.convert("RGBA" if alpha else "RGB"), dtype=np.float32) / 255.0
    except Exception as exc:
        raise ImageReadError(f"cannot decode image {path}: {reason(exc)}") from None
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    return np.ascontiguousarray(arr, dtype=np.float32)


def read_mask(path) -> np.ndarray:
    """A mask file as (H,W) float32 in [0,1]: the brightest colour channel (grey, RGB or a
    palette; an alpha channel is ignored). Black = masked (gsplat, Brush, OpenSplat)."""
    img = read_image(path)
    return np.ascontiguousarray(img[..., :3].max(axis=2))


def reason(exc: BaseException) -> str:
    """The first line of an exception's message, for one-line user errors."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text.replace(" (see above)", "")


def _resize_axis0(a: np.ndarray, n_out: int) -> np.ndarray:
    n_in = a.shape[0]
    if n_out == n_in:
        return a
    if n_in % n_out == 0:
        return a.reshape(n_out, n_in // n_out, *a.shape[1:]).mean(axis=1, dtype=np.float64)
    # Exact area average: out_k = (S(e_{k+1}) - S(e_k)) / step with S the integral of the
    # piecewise-constant input, e_k = k·n_in/n_out the output pixel edges in input pixels.
    step = n_in / n_out
    edges = np.arange(n_out + 1) * step
    idx = np.minimum(edges.astype(np.int64), n_in - 1)
    frac = (edges - idx).reshape(-1, *([1] * (a.ndim - 1)))
    csum = np.concatenate([np.zeros((1, *a.shape[1:])), np.cumsum(a, axis=0, dtype=np.float64)])
    s = csum[idx] + frac * a[idx]
    return np.diff(s, axis=0) / step


def resize_area(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize (H,W[,C]) to (height,width[,C]) by exact area averaging (separable box filter)."""
    out = _resize_axis0(np.asarray(image), height)
    out = np.swapaxes(_resize_axis0(np.swapaxes(out, 0, 1), width), 0, 1)
    return np.ascontiguousarray(out, dtype=np.float32)


def edge_pixels(image: np.ndarray, mask: np.ndarray | None = None,
                max_pixels: float = math.inf) -> float:
    """How much detail an (H,W,C) image in [0, 1] shows: the length of its edges times their
    contrast, in the image's own pixels — the sum of |I(x+1) − I(x)| (channels averaged) over
    neighbouring pixel pairs, both ways (one straight edge of contrast c across the image counts
    c × its length). Above ``max_pixels`` pixels it is measured on the image reduced (by area) to
    at most that many, then scaled by the reduction's linear factor: detail finer than that view
    does not count. Pairs with a masked end (``mask`` False) do not count; the sum is scaled up to
    the whole image by the kept fraction of its pixels."""
    img = np.asarray(image, np.float32)[..., :3]
    keep = np.ones(img.shape[:2], np.float32) if mask is None else np.asarray(mask, np.float32)
    h, w = img.shape[:2]
    f = 1.0
    if h * w > max_pixels:
        shrink = math.sqrt(max_pixels / (h * w))
        hh, ww = max(1, int(h * shrink)), max(1, int(w * shrink))
        img, keep = resize_area(img, hh, ww), resize_area(keep, hh, ww)
        f = math.sqrt(h * w / (hh * ww))
    whole = keep > 1.0 - 1e-4       # a reduced pixel counts when no masked pixel went into it
    kept = int(whole.sum())
    if kept == 0:
        return 0.0
    img = img.astype(np.float64)
    dx = np.abs(np.diff(img, axis=1)).mean(axis=2)[whole[:, 1:] & whole[:, :-1]].sum()
    dy = np.abs(np.diff(img, axis=0)).mean(axis=2)[whole[1:] & whole[:-1]].sum()
    return float((dx + dy) * f * whole.size / kept)


@dataclass(frozen=True)
class Distortion:
    """OpenCV radial-tangential lens distortion of normalised coordinates (x, y), r² = x²+y²:

    ``radial = (1 + Σ radial_i r^(2i+2)) / (1 + Σ rational_i r^(2i+2))``,
    ``x_d = x·radial + 2 p1 x y + p2 (r² + 2x²)``,
    ``y_d = y·radial + p1 (r² + 2y²) + 2 p2 x y``.
    ``radial`` holds k1, k2, k3, … (k4 is the r⁸ term, as in nerfstudio); ``rational`` holds
    FULL_OPENCV's k4 k5 k6.
    """

    radial: tuple[float, ...] = ()
    p1: float = 0.0
    p2: float = 0.0
    rational: tuple[float, ...] = ()

    @property
    def is_identity(self) -> bool:
        return not any(self.radial) and not any(self.rational) and self.p1 == 0 and self.p2 == 0

    def apply(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Forward model: undistorted normalised coordinates -> distorted ones."""
        r2 = x * x + y * y
        num, den, rk = np.ones_like(r2), np.ones_like(r2), np.ones_like(r2)
        for k in self.radial:
            rk = rk * r2
            num += k * rk
        rk = np.ones_like(r2)
        for k in self.rational:
            rk = rk * r2
            den += k * rk
        radial = num / den
        xy = x * y
        xd = x * radial + 2 * self.p1 * xy + self.p2 * (r2 + 2 * x * x)
        yd = y * radial + self.p1 * (r2 + 2 * y * y) + 2 * self.p2 * xy
        return xd, yd

    def describe(self) -> str:
        names = [f"k{i + 1}" for i in range(len(self.radial))] + ["p1", "p2"]
        names += [f"k{i + 4}" for i in range(len(self.rational))]
        vals = list(self.radial) + [self.p1, self.p2] + list(self.rational)
        return " ".join(f"{n}={v:.4g}" for n, v in zip(names, vals) if v != 0)


class FisheyeError(ValueError):
    """Fisheye parameters for which no pinhole view can be made (one readable line)."""


# The pinhole view of a fisheye keeps at most this half-angle along its diagonal: 90° is where a
# pinhole's image plane goes to infinity, and well before that the periphery is stretched so much
# that a pixel of the view holds a small fraction of one of the photo's.
FISHEYE_MAX_HALF_ANGLE = np.deg2rad(80.0)


@dataclass(frozen=True)
class Fisheye:
    """The OpenCV fisheye (equidistant-polynomial) lens: a ray at angle θ from the optical axis
    lands at distorted radius ``θ_d = θ (1 + k1 θ² + k2 θ⁴ + k3 θ⁶ + k4 θ⁸)`` in normalised
    coordinates (COLMAP OPENCV_FISHEYE; SIMPLE_RADIAL_FISHEYE and RADIAL_FISHEYE are its first one
    and two terms; transforms.json ``camera_model: OPENCV_FISHEYE`` or ``is_fisheye``).

    It is undistorted to a **pinhole view of focal length ``scale`` × the photo's** (same image
    size and principal point): :meth:`apply` maps the pinhole's normalised coordinates (in units
    of the photo's focal length, as :func:`undistort_image` passes them) to the photo's. The scale
    is :func:`fisheye_view`'s: the widest view without a pixel outside the photo.
    """

    k: tuple[float, ...]
    scale: float = 1.0

    is_identity = False

    def theta_d(self, theta: np.ndarray) -> np.ndarray:
        t2 = theta * theta
        poly, tk = np.ones_like(theta), np.ones_like(theta)
        for k in self.k:
            tk = tk * t2
            poly = poly + k * tk
        return theta * poly

    def apply(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = x / self.scale, y / self.scale   # the ray of the pinhole view's pixel
        r = np.sqrt(x * x + y * y)
        theta = np.arctan(r)
        f = np.where(r > 1e-12, self.theta_d(theta) / np.maximum(r, 1e-12), 1.0)
        return x * f, y * f

    def fold_angle(self) -> float:
        """The first angle (radians, below 90°) where θ_d stops growing: rays beyond it land
        where nearer rays already did (π/2 when it grows all the way)."""
        theta = np.linspace(0.0, np.pi / 2, 4097)[1:]
        grows = np.diff(self.theta_d(theta)) > 0
        return float(theta[np.argmin(grows)]) if not grows.all() else np.pi / 2

    def describe(self) -> str:
        terms = " ".join(f"k{i + 1}={v:.4g}" for i, v in enumerate(self.k) if v != 0)
        return f"fisheye {terms}".rstrip() + f" -> pinhole ×{self.scale:.3f} focal"


@functools.lru_cache(maxsize=64)
def _fisheye_view(k: tuple, width, height, fx, fy, cx, cy) -> Fisheye:
    return fisheye_view(k, width, height, fx, fy, cx, cy, cached=False)


def fisheye_view(k, width, height, fx, fy, cx, cy, cached: bool = True) -> Fisheye:
    """The fisheye lens ``k`` of a ``width``×``height`` photo undistorted to the widest pinhole
    view (same size and principal point, focal × ``scale``) in which every pixel sees the photo:
    the smallest scale for which no border pixel of the view samples outside the photo, its
    diagonal within :data:`FISHEYE_MAX_HALF_ANGLE` and before the lens model folds. Raises
    :class:`FisheyeError` when the lens model folds back inside the photo (its rays cannot be
    told apart there: not a lens)."""
    k = tuple(float(v) for v in k)
    if cached:   # every frame of a transforms.json asks again
        return _fisheye_view(k, int(width), int(height), float(fx), float(fy), float(cx), float(cy))
    if not all(np.isfinite(k)):
        raise FisheyeError(f"fisheye coefficients {k} are not finite")
    if not (fx > 0 and fy > 0):
        raise FisheyeError(f"focal lengths must be positive, got {fx:g}, {fy:g}")
    lens = Fisheye(k)
    fold = lens.fold_angle()
    # The photo's nearest edge, in normalised distorted radius: the lens must reach it.
    edge = min(cx / fx, (width - cx) / fx, cy / fy, (height - cy) / fy)
    if fold < np.pi / 2 and float(lens.theta_d(np.array(fold))) < edge:
        raise FisheyeError(
            f"{lens.describe().split(' ->')[0]}: the lens model folds back at "
            f"{np.rad2deg(fold):.1f}° off axis, inside the photo (its rays there cannot be told "
            "apart): the calibration is degenerate")
    limit = min(fold, FISHEYE_MAX_HALF_ANGLE)
    # Half-diagonal of the view in normalised units at scale 1; the view keeps θ ≤ limit there.
    diag = np.hypot(max(cx, width - cx) / fx, max(cy, height - cy) / fy)

    def fits(scale: float) -> bool:
        if np.arctan(diag / scale) > limit:
            return False
        return max_outside_pixels(width, height, fx, fy, cx, cy, Fisheye(k, scale)) <= 0.0

    lo, hi = 1e-3, 1.0
    while not fits(hi):
        hi *= 2.0
        if hi > 1e4:
            raise FisheyeError(f"{lens.describe().split(' ->')[0]}: no pinhole view "
                               "inside the photo: the calibration is degenerate")
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return Fisheye(k, hi)


def fisheye_kept_fraction(width, height, fx, fy, cx, cy, lens: Fisheye) -> float:
    """The fraction of the photo's area the pinhole view shows (the area inside its border
    mapped into the photo)."""
    t = np.linspace(0.0, 1.0, 513)
    u = np.concatenate([t * width, np.full_like(t, width), (1 - t) * width, np.zeros_like(t)])
    v = np.concatenate([np.zeros_like(t), t * height, np.full_like(t, height), (1 - t) * height])
    xd, yd = lens.apply((u - cx) / fx, (v - cy) / fy)
    px, py = fx * xd, fy * yd
    area = 0.5 * abs(np.dot(px, np.roll(py, -1)) - np.dot(py, np.roll(px, -1)))
    return float(area / (width * height))


def _distorted_pixels(width, height, fx, fy, cx, cy, dist: Distortion, u=None, v=None):
    """Source positions (index units, pixel centres at integers) of output pixel centres."""
    if u is None:
        u, v = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    xd, yd = dist.apply((u - cx) / fx, (v - cy) / fy)
    return fx * xd + cx - 0.5, fy * yd + cy - 0.5


@functools.lru_cache(maxsize=2)
def _remap_table(width, height, fx, fy, cx, cy, dist: Distortion):
    """Bilinear gather indices and weights of the undistortion remap (memoised per camera)."""
    sx, sy = _distorted_pixels(width, height, fx, fy, cx, cy, dist)
    sx = np.clip(sx, 0, width - 1).astype(np.float32)   # outside the photo: nearest edge pixel
    sy = np.clip(sy, 0, height - 1).astype(np.float32)
    x0, y0 = np.floor(sx).astype(np.int32), np.floor(sy).astype(np.int32)
    x1, y1 = np.minimum(x0 + 1, width - 1), np.minimum(y0 + 1, height - 1)
    corners = tuple((yy * width + xx).ravel() for yy in (y0, y1) for xx in (x0, x1))
    return corners, (sx - x0).reshape(-1, 1), (sy - y0).reshape(-1, 1)


def undistort_image(image: np.ndarray, fx, fy, cx, cy, dist: Distortion) -> np.ndarray:
    """The pinhole image with the same intrinsics as the distorted ``image`` (H,W,C)."""
    h, w, c = image.shape
    (i00, i01, i10, i11), wx, wy = _remap_table(w, h, float(fx), float(fy), float(cx),
                                                float(cy), dist)
    flat = np.ascontiguousarray(image, dtype=np.float32).reshape(-1, c)
    top, right = np.take(flat, i00, axis=0), np.take(flat, i01, axis=0)
    right -= top
    right *= wx
    top += right  # in-place blends: this runs on every pixel of full-size photos
    bottom, right = np.take(flat, i10, axis=0), np.take(flat, i11, axis=0)
    right -= bottom
    right *= wx
    bottom += right
    bottom -= top
    bottom *= wy
    top += bottom
    return top.reshape(h, w, c)


def max_outside_pixels(width, height, fx, fy, cx, cy, dist: Distortion) -> float:
    """How far (pixels) the border of the undistorted image samples outside the source."""
    t = np.linspace(0.0, 1.0, 257)
    u = np.concatenate([t * width, t * width, np.zeros_like(t), np.full_like(t, width)])
    v = np.concatenate([np.zeros_like(t), np.full_like(t, height), t * height, t * height])
    sx, sy = _distorted_pixels(width, height, fx, fy, cx, cy, dist, u, v)
    out = np.maximum.reduce([-0.5 - sx, sx - (width - 0.5), -0.5 - sy, sy - (height - 0.5)])
    return float(max(out.max(), 0.0))


def user_cache_root() -> Path:
    from .. import env

    chosen = env.CACHE.read()
    if chosen:
        return Path(chosen)
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "wgsl_splat"


def is_writable_dir(directory: Path) -> bool:
    """True when ``directory`` exists writable, or could be created in a writable ancestor.

    Besides ``os.access`` the mode bits must allow writing: root passes ``os.access`` everywhere,
    but a folder marked read-only (``r-x``, like the shared data) must still be left alone.
    """
    p = directory
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    try:
        mode = p.stat().st_mode
    except OSError:
        return False
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK) and bool(mode & 0o222)


class ImageCache:
    """Processed images as 8-bit PNGs ``<stem>-<key16>.png`` in the first writable candidate."""

    def __init__(self, candidates: list[Path]):
        self.candidates = candidates
        self._dir: Path | None = None
        self._resolved = False

    @property
    def directory(self) -> Path | None:
        if not self._resolved:
            self._dir = next((d for d in self.candidates if is_writable_dir(d)), None)
            self._resolved = True
        return self._dir

    def _path(self, stem: str, key: str) -> Path | None:
        d = self.directory
        return None if d is None else d / f"{stem}-{key}.png"

    def read(self, stem: str, key: str, shape: tuple[int, int]) -> np.ndarray | None:
        path = self._path(stem, key)
        if path is None or not path.is_file():
            return None
        from PIL import Image

        try:
            with Image.open(path) as im:
                arr = np.asarray(im)
        except Exception:
            return None  # a damaged entry is simply rebuilt
        ok = arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[:2] == shape
        return arr if ok and arr.shape[2] in (3, 4) else None

    def write(self, stem: str, key: str, arr: np.ndarray) -> bool:
        """Store ``arr`` (uint8); on failure try the next candidate. False when nothing could."""
        from PIL import Image

        from ..atomic_io import atomic_open

        while True:
            directory = self.directory
            if directory is None:
                return False
            path = directory / f"{stem}-{key}.png"
            try:
                directory.mkdir(parents=True, exist_ok=True)
                with atomic_open(path) as f:
                    Image.fromarray(arr).save(f, format="PNG", compress_level=1)
                break
            except OSError as exc:  # e.g. a read-only mount: fall through to the next candidate
                rest = self.candidates[self.candidates.index(directory) + 1:]
                self._dir = next((d for d in rest if is_writable_dir(d)), None)
                if self._dir is None:
                    warnings.warn(f"image cache disabled: cannot write {path}: {exc}")
        pattern = re.compile(re.escape(stem) + r"-[0-9a-f]{16}\.png")
        for old in os.listdir(directory):  # drop entries of older versions of this source
            if old != path.name and pattern.fullmatch(old):
                try:
                    os.unlink(directory / old)
                except OSError:
                    pass
        return True


def to_u8(img: np.ndarray) -> np.ndarray:
    return (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
