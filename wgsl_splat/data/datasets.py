"""Load training scenes: COLMAP sparse models, NeRF/instant-ngp ``transforms.json``, single images.

:func:`load_dataset` detects the kind of ``path`` and returns a :class:`Dataset` of posed pinhole
cameras (world-to-camera, OpenCV axes, docs/design.md §2), an optional SfM point cloud and a train/test
split. :meth:`Dataset.preload` decodes every image once before training (a bad file is an error
then, not hours later) and keeps them resident as 8-bit within a memory budget;
:meth:`Dataset.load_image` serves them as float32, decoding the ones beyond the budget again.

Decisions (see also the docstrings below):

- Lens distortion (transforms.json ``k1 k2 [k3 k4] p1 p2``; COLMAP ``SIMPLE_RADIAL``, ``RADIAL``,
  ``OPENCV``, ``FULL_OPENCV``) is removed on load: each pixel of an undistorted pinhole image with
  the *same* intrinsics samples the source bilinearly at its forward-distorted position (exact, no
  iterative inversion). The few output pixels whose source lies outside the photo take the nearest
  edge pixel. Fisheye lenses (COLMAP ``OPENCV_FISHEYE``, ``SIMPLE_RADIAL_FISHEYE``,
  ``RADIAL_FISHEYE``; transforms.json ``camera_model: OPENCV_FISHEYE`` or ``is_fisheye``) are
  undistorted the same way to a pinhole view of the same size and principal point whose focal
  length is chosen so that the view is as wide as it can be with every pixel inside the photo
  (:func:`~wgsl_splat.data.images.fisheye_view`; the note says how much of the photo it keeps).
  Other models are refused with the ``colmap image_undistorter`` hint.
- ``resolution=N`` shrinks every image by N with exact area averaging (a box filter that also
  handles sizes N does not divide; no cropping) and scales the cameras with :meth:`Camera.scaled`.
  Undistortion runs at the source resolution, before the downscale.
- Processed images (downscaled and/or undistorted) are cached as 8-bit PNGs in
  ``<scene>/.wgsl_splat_cache/r<N>/<name>-<key>.png``; the key hashes the source's path, size and
  mtime and the processing, so a changed source is re-processed (its stale entry is deleted). When
  the scene folder is read-only (checked by its mode bits too, so that running as root does not
  write into shared data) the cache goes to ``$XDG_CACHE_HOME/wgsl_splat/<scene>-<hash>/r<N>``.
  Cold and cached loads return identical arrays (both go through the 8-bit quantisation).
- RGBA images are downscaled with premultiplied alpha and composited on ``background`` last.
- **Masks** (docs/captures.md): ``masks/`` beside the image folder (COLMAP: beside ``images/``;
  transforms.json: beside the json, or a frame's ``mask_path`` as nerfstudio writes it) holds one
  mask per image under the image's name, the name with ``.png`` appended, or with its extension
  replaced by ``.png``; black = left out of the loss and the metrics. A mask of another size than
  its image, or masks for only some images, is an error. The alpha channel of an RGBA photo in a
  COLMAP scene is a mask too (combined with a mask file when both exist); transforms.json and
  Blender scenes keep compositing alpha onto the background (the NeRF-synthetic convention: there
  the background is part of the picture). Masks go through the same undistortion and area
  downscale as their images; a pixel counts when its processed mask value is ≥ 0.5. A view whose
  mask then keeps no pixel is left out of training and scoring by :meth:`Dataset.preload`.
- transforms.json values are type-checked (a wrong type names the key and the frame or file:
  ``"is_fisheye": "false"`` is no flag), and two frames of one image file are refused, as
  COLMAP's two images of one name are.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..camera import Camera
from ..contract.losses import masked_target
from .colmap_model import ColmapError, find_model, read_model
from .images import (
    IMAGE_EXTENSIONS,
    Distortion,
    Fisheye,
    FisheyeError,
    ImageCache,
    ImageReadError,
    fisheye_kept_fraction,
    fisheye_view,
    image_has_alpha,
    max_outside_pixels,
    read_image,
    read_image_size,
    read_mask,
    reason,
    resize_area,
    to_u8,
    undistort_image,
    user_cache_root,
)

__all__ = ["Dataset", "DatasetError", "ImageSource", "load_dataset"]

UNDISTORT_HINT = ("undistort the scene first: colmap image_undistorter --image_path images "
                  "--input_path sparse/0 --output_path undistorted, then train on undistorted/")
SINGLE_IMAGE_FOCAL_FACTOR = 10.0  # single-image mode: fx = fy = 10·max(W, H), nearly orthographic
NERF_SYNTHETIC_HALF_SIDE = 1.3    # 3DGS's random-init cube for Blender-layout scenes
MIN_DOWNSCALED_SIDE = 8  # px: -r may not shrink an image below this (1x1 images train silently)
MASK_FOLDER = "masks"    # beside images/ (gsplat, Brush, OpenSplat, nerfstudio)
MASK_KEEP = 0.5          # a processed mask value at or above this keeps the pixel
_CACHE_VERSION = "1"
_MAX_LISTED = 5
# Decoded images kept in memory by preload(), 8-bit (a quarter of float32): every training view
# of most scenes (300 views of 1080p take 1.9 GB); the held-out views, read once per evaluation,
# only up to a smaller budget.
TRAIN_RESIDENT_BYTES = 4 << 30
TEST_RESIDENT_BYTES = 512 << 20


class DatasetError(ValueError):
    """The scene cannot be loaded; the message is one readable line, meant for the user."""


def _checked(fn, path):
    """``fn(path)`` with image errors turned into :class:`DatasetError`."""
    try:
        return fn(path)
    except ImageReadError as exc:
        raise DatasetError(str(exc)) from None


def check_downscale(resolution: float, sizes) -> None:
    """Refuse a ``-r`` that shrinks one of the images (``(width, height)`` pairs) below
    :data:`MIN_DOWNSCALED_SIDE` pixels on a side (images already that small are left alone)."""
    if resolution <= 1:
        return
    w, h = min(sizes, key=min)
    scaled = (max(1, int(round(w / resolution))), max(1, int(round(h / resolution))))
    if min(scaled) < MIN_DOWNSCALED_SIDE:
        largest = max(1, int(min(w, h) / (MIN_DOWNSCALED_SIDE - 0.5)))
        raise DatasetError(f"-r {resolution:g} would shrink the {w}x{h} images to "
                           f"{scaled[0]}x{scaled[1]} px; at most -r {largest} keeps them "
                           f"{MIN_DOWNSCALED_SIDE} px on a side")


def _listing(items, limit: int = _MAX_LISTED) -> str:
    items = list(items)
    more = f", … ({len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(str(i) for i in items[:limit]) + more


# --------------------------------------------------------------------------------------- dataset

@dataclass(frozen=True)
class ImageSource:
    """Where a camera's pixels come from: the file, its actual size, and the intrinsics and
    distortion at that size (only used to undistort)."""

    path: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: Distortion | None = None
    mask: str | None = None   # the mask file (same size as the image), None: no mask file


@dataclass(eq=False)
class Dataset:
    """Posed cameras (already scaled to ``resolution``), an optional point cloud and a split.

    ``cameras[i].name`` is the image file name (COLMAP: the name stored in the model, relative to
    ``images/``; transforms.json: relative to the json where file names would collide, as in
    Blender's train/ and test/); cameras are sorted by name. ``points`` is (M,3) float64 and
    ``point_colors`` (M,3) float32 in [0,1], or both None: then initialise randomly inside
    :meth:`bounds`.
    """

    cameras: list[Camera]
    points: np.ndarray | None
    point_colors: np.ndarray | None
    train_indices: list[int]
    test_indices: list[int]
    background: np.ndarray
    kind: str  # "colmap" | "nerf" | "image" | "embedded"
    notes: list[str] = field(default_factory=list)
    root: str = ""
    resolution: float = 1.0
    aabb: np.ndarray | None = None  # (2,3) scene box declared by the data (instant-ngp aabb_scale)
    synthetic: bool = False         # Blender layout (transforms_train/test.json): NeRF-synthetic
    sources: list[ImageSource] = field(default_factory=list, repr=False)
    cache: ImageCache | None = field(default=None, repr=False)
    stats: dict = field(default_factory=lambda: {"decoded": 0, "cache_hits": 0,
                                                  "cache_writes": 0}, repr=False)
    memory_images: list[np.ndarray] | None = field(default=None, repr=False)  # embedded scene
    alpha_mask: bool = False   # an RGBA photo's alpha is a mask (COLMAP), not composited
    resident_masks: dict = field(default_factory=dict, init=False, repr=False)  # i -> mask/None
    resident: dict = field(default_factory=dict, init=False, repr=False)  # preload(): i -> pixels
    preloaded: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.background = np.asarray(self.background, dtype=np.float32).reshape(3)

    def __len__(self) -> int:
        return len(self.cameras)

    @property
    def train_cameras(self) -> list[Camera]:
        return [self.cameras[i] for i in self.train_indices]

    @property
    def test_cameras(self) -> list[Camera]:
        return [self.cameras[i] for i in self.test_indices]

    @property
    def cache_dir(self) -> Path | None:
        """Folder of processed images (None when every image loads straight from its file)."""
        return None if self.cache is None else self.cache.directory

    def load_image(self, i: int) -> np.ndarray:
        """Image of camera ``i``: (H,W,3) float32 in [0,1], alpha composited on the background
        (:attr:`alpha_mask`: alpha dropped, it is the mask of :meth:`load_mask`)."""
        if self.memory_images is not None:
            return self.memory_images[i]
        pixels = self.resident.get(i)
        return self._composite(self._pixels(i) if pixels is None else pixels)

    def load_mask(self, i: int) -> np.ndarray | None:
        """Camera ``i``'s mask, (H,W) bool, False = left out of the loss and the metrics; None
        when every pixel counts (no mask file, or one that keeps everything)."""
        if self.memory_images is not None:
            return None
        if i in self.resident_masks:
            return self.resident_masks[i]
        return self._mask(i, self.resident.get(i))

    def load_target(self, i: int) -> np.ndarray:
        """What training compares camera ``i``'s render with: :meth:`load_image` with its masked
        pixels set to :data:`~wgsl_splat.contract.losses.MASKED` (both paths' convention)."""
        return masked_target(self.load_image(i), self.load_mask(i))

    @property
    def has_mask_files(self) -> bool:
        return any(s.mask for s in self.sources)

    def preload(self, progress=None, train_budget: int = TRAIN_RESIDENT_BYTES,
                test_budget: int = TEST_RESIDENT_BYTES) -> None:
        """Decode (and cache, when processed) every image now, raising :class:`DatasetError` for
        the first bad one; keep the training images resident up to ``train_budget`` bytes and the
        held-out ones up to ``test_budget``. ``progress(n)`` is told of each image done.

        A view whose mask leaves no pixel at this resolution is left out of the split (a note
        names it): it would train nothing and could not be scored. The masks decide it, so a
        resumed run gets the same split; none left to train on is a :class:`DatasetError`."""
        if self.memory_images is not None or self.preloaded:
            if progress is not None:
                progress(len(self.cameras))
            return
        train = set(self.train_indices)
        used = {True: 0, False: 0}
        empty = []
        for i in range(len(self.cameras)):
            pixels = self._pixels(i)
            mask = self._mask(i, pixels)
            if mask is not None and not mask.any():
                empty.append(i)
            nbytes = pixels.nbytes + (0 if mask is None else mask.nbytes)
            is_train = i in train
            if used[is_train] + nbytes <= (train_budget if is_train else test_budget):
                self.resident[i] = pixels
                self.resident_masks[i] = mask
                used[is_train] += nbytes
            if progress is not None:
                progress(1)
        self._leave_out(empty)
        self.preloaded = True

    def _leave_out(self, empty: list[int]) -> None:
        """Drop the views ``empty`` (masks that keep no pixel) from the split, with a note."""
        if not empty:
            return
        gone = set(empty)
        names = [self.cameras[i].name for i in empty]
        where = f"at -r {self.resolution:g}"
        train = [i for i in self.train_indices if i not in gone]
        if not train:
            raise DatasetError(f"the mask of every training view leaves no pixel {where} "
                               f"({_listing(names)}): nothing to train on (black mask pixels and "
                               f"alpha 0 are left out; check the masks, or use a smaller -r)")
        self.train_indices = train
        self.test_indices = [i for i in self.test_indices if i not in gone]
        self.notes.append(f"{names[0]} left out of training and scoring: its mask leaves no pixel "
                          f"{where}" if len(names) == 1 else
                          f"{len(names)} views left out of training and scoring: their masks "
                          f"leave no pixel {where}: {_listing(names)}")

    def _pixels(self, i: int) -> np.ndarray:
        """Camera ``i``'s pixels before compositing (RGB or RGBA): uint8 whenever 8 bits hold
        them exactly (processed images are quantised anyway, most photos are 8-bit), else
        float32 (16-bit and float sources)."""
        cam, src = self.cameras[i], self.sources[i]
        shape = (cam.height, cam.width)
        processed = src.distortion is not None or (src.height, src.width) != shape
        if not processed:
            img = self._decode(src)
            u8 = to_u8(img)
            return u8 if np.array_equal(u8.astype(np.float32) / 255.0, img) else img
        if self.cache is None:
            return to_u8(self._process(self._decode(src), src, shape))
        stem, key = self._cache_key(i)
        cached = self.cache.read(stem, key, shape)
        if cached is not None:
            self.stats["cache_hits"] += 1
            return cached
        u8 = to_u8(self._process(self._decode(src), src, shape))
        if self.cache.write(stem, key, u8):
            self.stats["cache_writes"] += 1
        return u8

    def _mask(self, i: int, pixels: np.ndarray | None) -> np.ndarray | None:
        """The mask of camera ``i`` (:meth:`load_mask`) from its mask file and, when
        :attr:`alpha_mask`, the alpha of its processed ``pixels`` (decoded when None)."""
        cam, src = self.cameras[i], self.sources[i]
        shape = (cam.height, cam.width)
        keep = None
        if src.mask:
            m = _checked(read_mask, src.mask)
            if m.shape != (src.height, src.width):
                raise DatasetError(f"mask {src.mask} is {m.shape[1]}x{m.shape[0]} but its image "
                                   f"{src.path} is {src.width}x{src.height}")
            if src.distortion is not None:
                m = undistort_image(m[..., None], src.fx, src.fy, src.cx, src.cy,
                                    src.distortion)[..., 0]
            keep = resize_area(m, *shape) >= MASK_KEEP
        if self.alpha_mask and (pixels is not None or _checked(image_has_alpha, src.path)):
            pixels = self._pixels(i) if pixels is None else pixels   # decoded only when RGBA
            if pixels.shape[2] == 4:
                a = pixels[..., 3]
                a = a.astype(np.float32) / 255.0 if a.dtype == np.uint8 else a
                keep = (a >= MASK_KEEP) if keep is None else keep & (a >= MASK_KEEP)
        return None if keep is None or keep.all() else keep

    def _decode(self, src: ImageSource) -> np.ndarray:
        img = _checked(read_image, src.path)
        self.stats["decoded"] += 1
        if img.shape[:2] != (src.height, src.width):
            raise DatasetError(f"image {src.path} changed on disk: it is now "
                               f"{img.shape[1]}x{img.shape[0]}, was {src.width}x{src.height}")
        return img

    @staticmethod
    def _process(img: np.ndarray, src: ImageSource, shape: tuple[int, int]) -> np.ndarray:
        alpha = img.shape[2] == 4
        if alpha:  # filter premultiplied colour, so transparent pixels do not bleed in
            img = np.concatenate([img[..., :3] * img[..., 3:], img[..., 3:]], axis=2)
        if src.distortion is not None:
            img = undistort_image(img, src.fx, src.fy, src.cx, src.cy, src.distortion)
        img = resize_area(img, *shape)
        if alpha:
            a = img[..., 3:]
            img = np.concatenate([img[..., :3] / np.maximum(a, 1e-8), a], axis=2)
        return img

    def _composite(self, img: np.ndarray) -> np.ndarray:
        if img.dtype == np.uint8:
            img = img.astype(np.float32) / 255.0
        if img.shape[2] == 3 or self.alpha_mask:   # alpha_mask: the alpha is the mask
            return np.ascontiguousarray(img[..., :3], dtype=np.float32)
        a = img[..., 3:]
        return np.ascontiguousarray(img[..., :3] * a + self.background * (1.0 - a),
                                    dtype=np.float32)

    def _cache_key(self, i: int) -> tuple[str, str]:
        """(readable stem, 16-hex key of the source file's identity and the processing)."""
        cam, src = self.cameras[i], self.sources[i]
        shape = (cam.height, cam.width)
        st = os.stat(src.path)
        desc = "|".join(map(str, (_CACHE_VERSION, os.path.abspath(src.path), st.st_size,
                                  st.st_mtime_ns, src.width, src.height, shape, src.fx, src.fy,
                                  src.cx, src.cy, src.distortion)))
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.splitext(cam.name.replace("/", "__"))[0])
        return stem, hashlib.sha1(desc.encode()).hexdigest()[:16]

    def scene_extent(self) -> float:
        """3DGS ``cameras_extent``: 1.1 × the largest distance of a training camera centre from
        their mean. With a single camera position (single-image mode) 1.1 × the half-diagonal of
        :meth:`bounds` instead, so learning rates and thresholds stay meaningful."""
        cams = self.train_cameras or self.cameras
        centres = np.stack([c.center for c in cams])
        extent = float(np.linalg.norm(centres - centres.mean(axis=0), axis=1).max())
        if extent < 1e-9:
            lo, hi = self.bounds()
            extent = 0.5 * float(np.linalg.norm(hi - lo))
        return 1.1 * extent

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned box ``(lo, hi)`` for random initialisation when ``points`` is None.

        - point cloud present: its bounding box;
        - NeRF-synthetic (Blender layout): the cube [-1.3, 1.3]³, as 3DGS initialises these scenes
          (``readNerfSyntheticInfo``); their objects are normalised to fit it, cameras at radius ~4;
        - single image: the image plane at z = 1 (zero thickness: sample points on the plane);
        - otherwise from the cameras: a cube centred on the point closest (least squares) to all
          optical axes, half-side = half the median camera distance to it — the region the
          cameras look at, clear of the cameras themselves; intersected with the box the data
          declares (instant-ngp ``aabb_scale``) when there is one. When the axes do not converge
          in front of the cameras (forward-facing or outward-looking captures) the cube is centred
          on the mean camera centre with half-side 2 × the cameras' spread.
        """
        if self.points is not None and len(self.points):
            return self.points.min(axis=0), self.points.max(axis=0)
        if self.synthetic:
            half = np.full(3, NERF_SYNTHETIC_HALF_SIDE)
            return -half, half
        if self.kind == "image":
            c = self.cameras[0]
            half = np.array([0.5 * c.width / c.fx, 0.5 * c.height / c.fy, 0.0])
            mid = np.array([(c.width / 2 - c.cx) / c.fx, (c.height / 2 - c.cy) / c.fy, 1.0])
            return mid - half, mid + half
        centres = np.stack([c.center for c in self.cameras])
        axes = np.stack([c.rotation[2] for c in self.cameras])  # optical axes in world space
        focus = _nearest_point_to_lines(centres, axes)
        if focus is not None and np.median(np.einsum("ij,ij->i", focus - centres, axes)) > 0:
            half = 0.5 * float(np.median(np.linalg.norm(centres - focus, axis=1)))
        else:
            focus = centres.mean(axis=0)
            half = 2.0 * max(float(np.linalg.norm(centres - focus, axis=1).max()), 1e-3)
        lo, hi = focus - half, focus + half
        if self.aabb is not None:
            lo2, hi2 = np.maximum(lo, self.aabb[0]), np.minimum(hi, self.aabb[1])
            if np.all(hi2 > lo2):
                lo, hi = lo2, hi2
        return lo, hi


def _nearest_point_to_lines(origins: np.ndarray, dirs: np.ndarray) -> np.ndarray | None:
    """Least-squares point closest to the lines ``origins + t·dirs``; None if ill-conditioned."""
    dirs = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    proj = np.eye(3) - dirs[:, :, None] * dirs[:, None, :]
    a, b = proj.sum(axis=0), np.einsum("nij,nj->i", proj, origins)
    if np.linalg.eigvalsh(a)[0] < 0.02 * len(origins):  # axes (nearly) parallel
        return None
    return np.linalg.solve(a, b)


# ------------------------------------------------------------------------------------ loading

# -- scene formats ------------------------------------------------------------------------------------
@dataclass
class SceneRequest:
    """What a format's loader is asked for besides the path: the folder of the photos (COLMAP) and
    the background a synthetic scene is composited on."""

    images: str = "images"
    background: np.ndarray = field(default_factory=lambda: np.zeros(3, np.float32))


@dataclass
class SceneParts:
    """What a format's loader returns: its cameras at full resolution (OpenCV convention,
    docs/design.md §2) with their image sources, in any order (they are sorted by name), an
    optional point cloud, the format's own train/test split (``split_hint``: view names per split;
    None: every 8th view), the scene's box where the format gives one, whether it is synthetic
    (Blender)."""

    root: Path
    kind: str
    cameras: list
    sources: list
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    split_hint: dict | None = None
    aabb: np.ndarray | None = None
    synthetic: bool = False
    mask_origin: str | None = None   # where the sources' masks came from (messages), None: none


@dataclass(frozen=True)
class SceneFormat:
    """A scene format: ``detect(path)`` says whether ``path`` holds one, ``load(path, request,
    notes)`` reads it (:class:`SceneParts`; :class:`DatasetError` with one line for anything
    unusable; ``notes`` collects what the user should know). The downscaling, the cache, the
    split and the checks are shared by every format (:func:`load_dataset`)."""

    name: str
    detect: Callable[[Path], bool]
    load: Callable[[Path, SceneRequest, list], SceneParts]
    what: str   # what the user passes, for the CLI's help and the "not a dataset" error


def _mask_file(folder: Path, name: str) -> str | None:
    """The mask of image ``name`` (relative to its image folder) in ``folder``: the same name,
    the name + ``.png``, or the name with ``.png`` for its extension."""
    for candidate in (name, name + ".png", str(Path(name).with_suffix(".png"))):
        if (folder / candidate).is_file():
            return str(folder / candidate)
    return None


def _in_image_folder(base: Path, image: str) -> str:
    """``image``'s path relative to the folder under ``base`` that holds it (images/x/y.png ->
    x/y.png; a file directly in ``base``: its name)."""
    parts = Path(os.path.relpath(image, base)).parts
    return Path(*parts[1:]).as_posix() if len(parts) > 1 else parts[0]


def _check_masks(scene: SceneParts, notes: list) -> None:
    """Every image has a mask of its own size, or none has (one line otherwise)."""
    if scene.mask_origin is None:
        return
    without = [c.name for c, s in zip(scene.cameras, scene.sources) if not s.mask]
    if without:
        raise DatasetError(f"{scene.mask_origin} has masks for {len(scene.sources) - len(without)} "
                           f"of {len(scene.sources)} images; missing for {_listing(without)} "
                           "(every image needs one: an all-white mask keeps a whole image)")
    for src in scene.sources:
        size = _checked(read_image_size, src.mask)
        if size != (src.width, src.height):
            raise DatasetError(f"mask {src.mask} is {size[0]}x{size[1]} but its image "
                               f"{src.path} is {src.width}x{src.height}")
    notes.append(f"masks from {scene.mask_origin} for all {len(scene.sources)} images: black "
                 "pixels are left out of the loss and the metrics")


def _colmap_model(p: Path):
    return (find_model(p / "sparse" / "0") or find_model(p / "sparse")) if p.is_dir() else None


def _load_colmap_scene(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    full, sources, points, colors = _load_colmap(p, _colmap_model(p), p / req.images, notes)
    masks = (p / req.images).parent / MASK_FOLDER
    if masks.is_dir():
        sources = [replace(s, mask=_mask_file(masks, c.name)) for c, s in zip(full, sources)]
    return SceneParts(p, "colmap", full, sources, points, colors,
                      mask_origin=f"{MASK_FOLDER}/" if masks.is_dir() else None)


def _transforms_file(p: Path) -> Path | None:
    if p.is_file() and p.suffix.lower() == ".json":
        return p
    return p / "transforms.json" if p.is_dir() and (p / "transforms.json").is_file() else None


def _load_transforms_scene(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    path = _transforms_file(p)
    full, sources, points, colors, split_hint, aabb = _load_transforms([path], notes)
    origin = "mask_path" if any(s.mask for s in sources) else None
    masks = path.parent / MASK_FOLDER
    if origin is None and masks.is_dir():   # nerfstudio layout: images/x.png -> masks/x.png
        origin = f"{MASK_FOLDER}/"
        sources = [replace(s, mask=_mask_file(masks, _in_image_folder(path.parent, s.path)))
                   for s in sources]
    return SceneParts(path.parent, "nerf", full, sources, points, colors, split_hint, aabb,
                      mask_origin=origin)


def _blender_files(p: Path) -> list[Path]:
    return [p / f"transforms_{s}.json" for s in ("train", "test")] if p.is_dir() else []


def _load_blender_scene(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    train, test = _blender_files(p)
    if not train.is_file():
        raise DatasetError(f"{test} has no transforms_train.json beside it: a Blender scene trains "
                           "on transforms_train.json and evaluates on transforms_test.json")
    full, sources, points, colors, split_hint, aabb = _load_transforms(
        [b for b in (train, test) if b.is_file()], notes, synthetic=True)
    if np.any(req.background != 0):
        _require_alpha(sources, req.background)
    return SceneParts(p, "nerf", full, sources, points, colors, split_hint, aabb, synthetic=True)


def _load_image_scene(p: Path, req: SceneRequest, notes: list) -> SceneParts:
    full, sources = _load_single_image(p)
    return SceneParts(p.parent, "image", full, sources)


#: The formats :func:`load_dataset` reads, tried in this order (a folder with both a COLMAP model
#: and a transforms.json is read as COLMAP). Adding a format is adding an entry.
SCENE_FORMATS: list[SceneFormat] = [
    SceneFormat("colmap", lambda p: _colmap_model(p) is not None, _load_colmap_scene,
                "a COLMAP folder (sparse/0/ or sparse/ with cameras/images .bin or .txt)"),
    SceneFormat("transforms.json", lambda p: _transforms_file(p) is not None,
                _load_transforms_scene, "a transforms.json or its folder"),
    SceneFormat("blender", lambda p: any(b.is_file() for b in _blender_files(p)),
                _load_blender_scene, "a Blender scene (transforms_train.json + _test.json)"),
    SceneFormat("image", lambda p: p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS,
                _load_image_scene, "an image file"),
]


def scene_formats_text() -> str:
    """The formats as the CLI's help and errors list them, from :data:`SCENE_FORMATS`."""
    return ", ".join(f.what for f in SCENE_FORMATS)


def _not_a_scene(p: Path) -> str:
    """Why ``p`` is no scene of any format (one line)."""
    if p.is_file():
        return (f"{p} is neither an image ({', '.join(IMAGE_EXTENSIONS)}) nor a transforms.json")
    if p.is_dir() and find_model(p):
        return (f"{p} is a COLMAP model folder; pass the scene folder that holds sparse/ and "
                "images/ instead")
    if p.is_dir():
        return f"{p} is not a dataset: expected one of: {scene_formats_text()}"
    return f"{p} is neither a file nor a folder"


def load_dataset(path, *, resolution: float = 1, eval_split: bool = False,
                 background=(0.0, 0.0, 0.0), cache_dir=None, images: str = "images") -> Dataset:
    """Load the scene at ``path``: a folder with ``sparse/0/`` or ``sparse/`` (COLMAP, photos in
    ``images/`` or the folder named by ``images``), a ``transforms.json`` (or Blender's
    ``transforms_train.json`` + ``transforms_test.json``, merged) or its folder, or one image file.

    ``resolution``: downscale factor ≥ 1. ``eval_split``: cameras sorted by name, every 8th
    (i % 8 == 0) is a test view; a Blender layout keeps its own train/test files instead (as 3DGS).
    ``cache_dir``: root of the processed-image cache (default ``<scene>/.wgsl_splat_cache``).
    Raises :class:`DatasetError` with a one-line message for anything unusable.
    """
    try:
        resolution = float(resolution)
    except (TypeError, ValueError):
        raise DatasetError(f"resolution must be a number, got {resolution!r}") from None
    if not math.isfinite(resolution) or resolution < 1:
        raise DatasetError(f"resolution must be a downscale factor >= 1, got {resolution:g}")
    bg = np.asarray(background, dtype=np.float32).ravel()
    if bg.shape != (3,):
        raise DatasetError(f"background must have 3 values, got {list(bg)}")

    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetError(f"dataset path does not exist: {p}")
    notes: list[str] = []
    fmt = next((f for f in SCENE_FORMATS if f.detect(p)), None)
    if fmt is None:
        raise DatasetError(_not_a_scene(p))
    scene = fmt.load(p, SceneRequest(images=images, background=bg), notes)
    root, kind, full, sources = scene.root, scene.kind, scene.cameras, scene.sources
    points, colors, split_hint, aabb = scene.points, scene.colors, scene.split_hint, scene.aabb
    synthetic = scene.synthetic
    if not full:
        raise DatasetError(f"{p}: the dataset has no cameras")
    _check_masks(scene, notes)
    check_downscale(resolution, [(c.width, c.height) for c in full])
    order = sorted(range(len(full)), key=lambda i: full[i].name)
    cameras = [full[i].scaled(resolution) for i in order]
    sources = [sources[i] for i in order]
    train, test = _split(cameras, kind, eval_split, split_hint, notes)

    processed = any(s.distortion is not None or (s.width, s.height) != (c.width, c.height)
                    for s, c in zip(sources, cameras))
    cache = None
    if processed:
        label = f"r{resolution:g}"
        if cache_dir is not None:
            cache = ImageCache([Path(cache_dir).expanduser() / label])
            if cache.directory is None:
                raise DatasetError(f"cache folder {cache_dir} is not writable")
        else:
            digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:10]
            fallback = user_cache_root() / f"{root.resolve().name or 'scene'}-{digest}" / label
            cache = ImageCache([root / ".wgsl_splat_cache" / label, fallback])
    return Dataset(cameras, points, colors, train, test, bg, kind, notes, str(root), resolution,
                   aabb, synthetic, sources, cache, alpha_mask=kind == "colmap")


def _require_alpha(sources: list[ImageSource], background: np.ndarray) -> None:
    """A synthetic (Blender) scene is composited on the background at load: its images must carry
    the alpha channel that says where the object is (one header read per image)."""
    for src in sources:
        if not _checked(image_has_alpha, src.path):
            raise DatasetError(f"image {src.path} has no alpha channel: a Blender-layout scene is "
                               f"RGBA, composited on the background ({', '.join(f'{c:g}' for c in background)}) "
                               "when loaded; use the RGBA originals, or train without a background colour")


def _split(cameras, kind, eval_split, split_hint, notes) -> tuple[list[int], list[int]]:
    n = len(cameras)
    if not eval_split:
        return list(range(n)), []
    if kind == "image":
        notes.append("single image: the evaluation view is the training image")
        return [0], [0]
    if split_hint is not None and any(split_hint.get(c.image_path) == "test" for c in cameras):
        test = [i for i, c in enumerate(cameras) if split_hint.get(c.image_path) == "test"]
        notes.append(f"eval split from transforms_test.json: {len(test)} test views")
    else:
        test = list(range(0, n, 8))
    held_out = set(test)
    train = [i for i in range(n) if i not in held_out]
    if not train:
        notes.append("too few images for a held-out split: all views are used for training")
        train = list(range(n))
    return train, test


def _list_images(folder: Path) -> list[str]:
    """Image files under ``folder`` (recursive, hidden folders skipped), as relative posix paths."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(folder)
        found += [(rel / f).as_posix() for f in filenames
                  if os.path.splitext(f)[1].lower() in IMAGE_EXTENSIONS]
    return sorted(found)


def _source_size(path: Path, width: int, height: int, what: str,
                 size: tuple[int, int] | None = None) -> tuple[int, int]:
    """The file's size (``size`` if already read), checked against the camera's: equal, or an
    exact downscale of it."""
    ws, hs = size or _checked(read_image_size, path)
    if (ws, hs) == (width, height):
        return ws, hs
    for k in (width / ws, height / hs):
        if k > 1 and (round(width / k), round(height / k)) == (ws, hs):
            return ws, hs
    raise DatasetError(f"image {path} is {ws}x{hs} but {what} is {width}x{height} "
                       "(nor is the image an exact downscale of it)")


def _scaled_source(path, ws, hs, width, height, fx, fy, cx, cy, dist) -> ImageSource:
    sx, sy = ws / width, hs / height
    return ImageSource(str(path), ws, hs, fx * sx, fy * sy, cx * sx, cy * sy, dist)


def _distortion_note(sources: list[ImageSource], what: str) -> str | None:
    fisheye = {(s.width, s.height, s.fx, s.fy, s.cx, s.cy, s.distortion): s for s in sources
               if isinstance(s.distortion, Fisheye)}
    if fisheye:
        kept = [fisheye_kept_fraction(*key) for key in fisheye]
        fov = [np.rad2deg(2 * np.arctan(0.5 * w / (fx * d.scale))) for w, _, fx, _, _, _, d in fisheye]
        n = sum(isinstance(s.distortion, Fisheye) for s in sources)
        return (f"undistorting {n} fisheye images to pinhole views on load ({what}): the widest "
                f"view with every pixel inside the photo, horizontal field of view "
                f"{min(fov):.0f}°{'' if max(fov) - min(fov) < 0.5 else f'–{max(fov):.0f}°'}, "
                f"keeping {100 * min(kept):.0f}%"
                f"{'' if max(kept) - min(kept) < 0.005 else f'–{100 * max(kept):.0f}%'} of the "
                f"photo's area (the corners beyond it are cropped) at focal length ×"
                f"{min(d.scale for *_, d in fisheye):.2f} (the centre's sampling)")
    distorted = [s for s in sources if s.distortion is not None]
    if not distorted:
        return None
    outside = max(max_outside_pixels(s.width, s.height, s.fx, s.fy, s.cx, s.cy, s.distortion)
                  for s in {(s.width, s.height, s.fx, s.fy, s.cx, s.cy, s.distortion): s
                            for s in distorted}.values())
    kinds = sorted({s.distortion.describe() for s in distorted})
    return (f"undistorting {len(distorted)} images on load ({what}: {_listing(kinds, 2)}; same "
            f"pinhole intrinsics, up to {outside:.1f} px at the borders edge-clamped)")


# -------------------------------------------------------------------------------------- COLMAP

def _fisheye(k, cam, fx, fy, cx, cy, where: str) -> Fisheye:
    try:
        return fisheye_view(k, cam.width, cam.height, fx, fy, cx, cy)
    except FisheyeError as exc:
        raise DatasetError(f"{where}: {exc}") from None


def _colmap_intrinsics(cam) -> tuple[float, float, float, float, Distortion | Fisheye | None]:
    p = [float(v) for v in cam.params]
    where = f"camera {cam.id} ({cam.model})"
    if cam.model == "OPENCV_FISHEYE":
        return p[0], p[1], p[2], p[3], _fisheye(p[4:8], cam, *p[:4], where)
    if cam.model == "SIMPLE_RADIAL_FISHEYE":
        return p[0], p[0], p[1], p[2], _fisheye(p[3:4], cam, p[0], p[0], p[1], p[2], where)
    if cam.model == "RADIAL_FISHEYE":
        return p[0], p[0], p[1], p[2], _fisheye(p[3:5], cam, p[0], p[0], p[1], p[2], where)
    if cam.model == "SIMPLE_PINHOLE":
        return p[0], p[0], p[1], p[2], None
    if cam.model == "PINHOLE":
        return p[0], p[1], p[2], p[3], None
    if cam.model == "SIMPLE_RADIAL":
        return p[0], p[0], p[1], p[2], Distortion((p[3],))
    if cam.model == "RADIAL":
        return p[0], p[0], p[1], p[2], Distortion((p[3], p[4]))
    if cam.model == "OPENCV":
        return p[0], p[1], p[2], p[3], Distortion((p[4], p[5]), p[6], p[7])
    if cam.model == "FULL_OPENCV":
        return p[0], p[1], p[2], p[3], Distortion((p[4], p[5], p[8]), p[6], p[7], tuple(p[9:12]))
    raise DatasetError(f"camera {cam.id} uses the {cam.model} model, which wgsl_splat cannot "
                       f"undistort; {UNDISTORT_HINT}")


def _load_colmap(root: Path, model: tuple[str, str], images_dir: Path, notes: list[str]):
    model_dir, fmt = model
    try:
        m = read_model(model_dir, fmt)
    except ColmapError as exc:
        raise DatasetError(str(exc)) from None
    rel_model = os.path.relpath(model_dir, root)
    if not images_dir.is_dir():
        raise DatasetError(f"{root}: COLMAP model found but no image folder {images_dir.name}/")
    registered = sorted(m.images.values(), key=lambda im: im.name)
    if not registered:
        raise DatasetError(f"{model_dir}: the COLMAP model has no registered images")
    # Two poses for one file: training on either would be silently wrong (the other image would
    # look unregistered), so the model is refused.
    for a, b in zip(registered, registered[1:]):
        if a.name == b.name:
            raise DatasetError(f"{rel_model}: images {a.id} and {b.id} are both named {a.name!r}: "
                               f"each registered image needs its own file; fix or re-export the "
                               f"COLMAP model")
    missing = [im.name for im in registered if not (images_dir / im.name).is_file()]
    if missing:
        raise DatasetError(f"{len(missing)} of {len(registered)} images registered in "
                           f"{rel_model} are missing from {images_dir}: {_listing(missing)}")
    unregistered = sorted(set(_list_images(images_dir)) - {im.name for im in registered})
    if unregistered:
        notes.append(f"skipped {len(unregistered)} unregistered images (no pose in {rel_model}): "
                     f"{_listing(unregistered)}")
    cams, sources = [], []
    for im in registered:
        if im.camera_id not in m.cameras:
            raise DatasetError(f"image {im.name} refers to camera {im.camera_id}, which "
                               f"{rel_model} does not define")
        c = m.cameras[im.camera_id]
        fx, fy, cx, cy, dist = _colmap_intrinsics(c)
        if dist is not None and dist.is_identity:
            dist = None
        path = images_dir / im.name
        ws, hs = _source_size(path, c.width, c.height, f"its camera {c.id} ({c.model})")
        view = dist.scale if isinstance(dist, Fisheye) else 1.0   # the pinhole view's focal
        try:
            cams.append(Camera(im.world_to_camera, fx * view, fy * view, cx, cy, c.width,
                               c.height, im.name, str(path)))
        except ValueError as exc:
            raise DatasetError(f"image {im.name}, camera {c.id}: {exc}") from None
        sources.append(_scaled_source(path, ws, hs, c.width, c.height, fx, fy, cx, cy, dist))
    used = {m.cameras[im.camera_id].model for im in registered} - {"PINHOLE", "SIMPLE_PINHOLE"}
    note = _distortion_note(sources, "COLMAP " + "/".join(sorted(used)))
    if note:
        notes.append(note)
    points = colors = None
    if m.points is None:
        notes.append(f"no points3D file in {rel_model}: initialise randomly inside the bounds")
    elif len(m.points.xyz) == 0:
        notes.append(f"empty point cloud in {rel_model}: initialise randomly inside the bounds")
    else:
        points, colors = _finite_points(m.points.xyz.astype(np.float64),
                                        m.points.rgb.astype(np.float32) / 255.0, rel_model, notes)
    return cams, sources, points, colors


def _finite_points(xyz: np.ndarray, rgb: np.ndarray, what: str, notes: list[str]):
    """The point cloud without its rows that hold NaN or infinity (a note says how many went);
    ``(None, None)`` when nothing is left (random initialisation)."""
    ok = np.all(np.isfinite(xyz), axis=1) & np.all(np.isfinite(rgb), axis=1)
    if ok.all():
        return xyz, rgb
    notes.append(f"dropped {int((~ok).sum())} of {len(ok)} points of {what} with non-finite "
                 f"values" + ("" if ok.any() else ": initialise randomly inside the bounds"))
    return (xyz[ok], rgb[ok]) if ok.any() else (None, None)


# ------------------------------------------------------------------------------- transforms.json

_OPENGL_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])
_JSON_KINDS = {bool: "true or false (a JSON boolean)", float: "a finite number",
               int: "a whole number", str: "a string"}


def _typed(value, kind: type, key: str, where: str):
    """``value``, read from key ``key`` of a dataset file, when it has the JSON type ``kind``
    (bool, str, float: a finite number, int: a whole one); None when absent (null). A wrong type
    is a :class:`DatasetError` naming the key and ``where``: ``bool("false")`` is True, so a
    string is never taken for a flag, nor a flag for a number."""
    if value is None:
        return None
    if kind in (float, int):
        try:
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value) and (kind is float or float(value).is_integer()))
        except OverflowError:   # an integer beyond float's range
            ok = False
    else:
        ok = isinstance(value, kind)
    if not ok:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise DatasetError(f"{where}: {key} must be {_JSON_KINDS[kind]}, got {shown}")
    return kind(value) if kind in (float, int) else value


def _file_identity(path: Path):
    """What two spellings of one file share (its inode, else its resolved path)."""
    st = path.stat()
    return (st.st_dev, st.st_ino) if st.st_ino else os.path.normcase(os.path.realpath(path))


def _resolve_frame_path(base: Path, file_path: str) -> Path | None:
    p = base / file_path
    if p.is_file():
        return p
    for ext in IMAGE_EXTENSIONS + tuple(e.upper() for e in IMAGE_EXTENSIONS):
        q = p.with_name(p.name + ext)
        if q.is_file():
            return q
    return None


def _frame_pose(matrix, where: str) -> np.ndarray:
    try:
        m = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        m = np.zeros(0)
    if m.shape == (3, 4):
        m = np.vstack([m, [0, 0, 0, 1]])
    if m.shape != (4, 4) or not np.all(np.isfinite(m)):
        raise DatasetError(f"{where}: transform_matrix must be a finite 4x4 (or 3x4) matrix")
    c2w = m @ _OPENGL_TO_OPENCV  # OpenGL camera axes (y up, z back) -> OpenCV (y down, z forward)
    rot = c2w[:3, :3]
    singular = np.linalg.svd(rot, compute_uv=False)
    if singular[-1] < 1e-6 * max(singular[0], 1e-300):   # all zero, or flattened: no orientation
        raise DatasetError(f"{where}: transform_matrix has a degenerate rotation (singular values "
                           f"{np.array2string(singular, precision=3)})")
    if not np.allclose(rot.T @ rot, np.eye(3), atol=1e-3):
        u, _, vt = np.linalg.svd(rot)
        rot = u @ vt
    if np.linalg.det(rot) <= 0:
        raise DatasetError(f"{where}: transform_matrix is not a rotation (mirrored axes)")
    w2c = np.eye(4)
    w2c[:3, :3] = rot.T
    w2c[:3, 3] = -rot.T @ c2w[:3, 3]
    return w2c


def _ngp_aabb(meta: dict, where: str) -> np.ndarray | None:
    """instant-ngp's scene box in the transforms' frame: ngp = nerf·scale + offset, and the box is
    0.5 ± aabb_scale/2 in ngp units (defaults scale 0.33, offset 0.5)."""
    aabb_scale = _typed(meta.get("aabb_scale"), float, "aabb_scale", where)
    if aabb_scale is None:
        return None
    scale = _typed(meta.get("scale"), float, "scale", where)
    scale = 0.33 if scale is None else scale
    if scale == 0:
        raise DatasetError(f"{where}: scale must not be 0")
    offset = meta.get("offset")
    if isinstance(offset, list) and len(offset) == 3:
        offset = np.array([_typed(v, float, "offset", where) for v in offset], dtype=np.float64)
    elif offset is not None:
        offset = _typed(offset, float, "offset (a number or a list of 3)", where)
    offset = np.broadcast_to(np.asarray(0.5 if offset is None else offset, np.float64), (3,))
    half = 0.5 * aabb_scale / scale
    centre = (0.5 - offset) / scale
    return np.stack([centre - half, centre + half])


def _read_point_cloud(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """xyz (float64) and colours (float32 in [0,1], grey when absent) of a PLY's vertices."""
    from .ply import (  # the generic PLY vertex reader
        PlyError,
        _read_header,
        _read_vertices,
    )

    try:
        with open(path, "rb") as f:
            fmt, elements = _read_header(f)
            cols = _read_vertices(f, fmt, elements)
    except (OSError, PlyError) as exc:
        raise DatasetError(f"cannot read point cloud {path}: {reason(exc)}") from None
    if not all(k in cols for k in "xyz"):
        raise DatasetError(f"point cloud {path} has no x/y/z vertex properties")
    xyz = np.stack([cols[k] for k in "xyz"], axis=1).astype(np.float64)
    if all(k in cols for k in ("red", "green", "blue")):
        rgb = np.stack([cols[k] for k in ("red", "green", "blue")], axis=1).astype(np.float32)
        rgb = rgb / (255.0 if rgb.max(initial=0) > 1 else 1.0)
    else:
        rgb = np.full_like(xyz, 0.5, dtype=np.float32)
    return (xyz, rgb) if len(xyz) else None


def _load_transforms(json_paths: list[Path], notes: list[str], synthetic: bool = False):
    cams, sources, missing, split_of, aabb = [], [], [], {}, None
    cloud = None
    seen: dict = {}   # file identity -> (where, file_path, pose) of the frame that uses it
    for jp in json_paths:
        try:
            meta = json.loads(jp.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise DatasetError(f"cannot read {jp}: {reason(exc)}") from None
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{jp}: invalid JSON ({exc})") from None
        frames = meta.get("frames") if isinstance(meta, dict) else None
        if not isinstance(frames, list) or not frames:
            raise DatasetError(f"{jp}: no 'frames' list")
        aabb = _ngp_aabb(meta, jp.name) if aabb is None else aabb
        ply_file = _typed(meta.get("ply_file_path"), str, "ply_file_path", jp.name)
        if cloud is None and ply_file:  # nerfstudio exports its SfM points
            cloud = _read_point_cloud(jp.parent / ply_file)
            if cloud is None:
                notes.append(f"empty point cloud {ply_file}: random initialisation")
            else:
                xyz, rgb = _finite_points(*cloud, ply_file, notes)
                cloud = None if xyz is None else (xyz, rgb)
        for i, frame in enumerate(frames):
            where = f"{jp.name} frame {i}"
            if not isinstance(frame, dict) or frame.get("file_path") is None:
                raise DatasetError(f"{where}: no file_path")
            file_path = _typed(frame["file_path"], str, "file_path", where)
            path = _resolve_frame_path(jp.parent, file_path)
            if path is None:
                missing.append(file_path)
                continue
            w2c = _frame_pose(frame.get("transform_matrix"), where)
            _check_not_seen(seen, _file_identity(path), (where, file_path, w2c), path, json_paths)
            cam, src = _transforms_camera(meta, frame, path, w2c, where, jp.name)
            mask_path = _typed(frame.get("mask_path"), str, "mask_path", where)
            if mask_path:   # nerfstudio: a mask per frame, relative to the json
                mask = jp.parent / mask_path
                if not mask.is_file():
                    raise DatasetError(f"{where}: mask_path {mask_path} does not exist")
                src = replace(src, mask=str(mask))
            cams.append(cam)
            sources.append(src)
            split_of[str(path)] = "test" if jp.name == "transforms_test.json" else "train"
    if missing:
        raise DatasetError(f"{len(missing)} images referenced by "
                           f"{' + '.join(p.name for p in json_paths)} are missing: "
                           f"{_listing(missing)}")
    base = json_paths[0].parent
    if len({c.name for c in cams}) < len(cams):  # e.g. Blender's train/r_0.png and test/r_0.png
        for c in cams:
            c.name = Path(os.path.relpath(c.image_path, base)).as_posix()
    note = _distortion_note(sources, "transforms.json")
    if note:
        notes.append(note)
    if len(json_paths) > 1:
        notes.append("merged " + " + ".join(p.name for p in json_paths))
    if cloud is None:
        if synthetic:
            notes.append(f"no point cloud: initialise randomly in the cube ±{NERF_SYNTHETIC_HALF_SIDE} "
                         "(NeRF-synthetic, as 3DGS)")
        else:
            notes.append("no point cloud: initialise randomly inside bounds() (the region the cameras "
                         "look at" + (", within the aabb_scale box)" if aabb is not None else ")"))
    hint = split_of if len(json_paths) > 1 else None
    points, colors = cloud if cloud is not None else (None, None)
    return cams, sources, points, colors, hint, aabb


def _check_not_seen(seen: dict, key, frame: tuple, path: Path, json_paths: list[Path]) -> None:
    """Refuse a second frame of one image file (``seen``: the frames so far by file identity):
    with two poses either one is wrong; listed twice it trains twice and is scored once. The
    frames and both spellings are named (COLMAP's own case: ``_load_colmap``)."""
    if key not in seen:
        seen[key] = frame
        return
    (first, first_path, first_pose), (where, file_path, pose) = seen[key], frame
    spelled = (repr(file_path) if file_path == first_path
               else f"{first_path!r} and {file_path!r}")
    shown = Path(os.path.relpath(path, json_paths[0].parent)).as_posix()
    files = " + ".join(p.name for p in json_paths)
    if np.allclose(pose, first_pose, rtol=0, atol=1e-9):
        raise DatasetError(f"{first} and {where} both list the image {shown} ({spelled}): a frame "
                           f"listed twice is trained twice and scored once; remove one from "
                           f"{files}")
    raise DatasetError(f"{first} and {where} both use the image {shown} ({spelled}) with "
                       f"different poses: each frame needs its own image file; fix or re-export "
                       f"{files}")


def _transforms_camera(meta: dict, frame: dict, path: Path, w2c: np.ndarray, where: str,
                       file_where: str):
    def get(key, kind, default=None):   # the frame's value, else the file's; type-checked
        here = frame.get(key) is not None
        value = _typed(frame[key] if here else meta.get(key), kind, key,
                       where if here else file_where)
        return default if value is None else value

    def focal(key, side):   # from a field of view, in radians
        angle = get(key, float)
        if not 0 < angle < math.pi:
            raise DatasetError(f"{where}: {key} must be an angle in radians between 0 and pi, "
                               f"got {angle:g}")
        return 0.5 * side / math.tan(0.5 * angle)

    model = get("camera_model", str, "OPENCV").upper()
    fisheye = model == "OPENCV_FISHEYE" or get("is_fisheye", bool, False)
    if model not in ("OPENCV", "OPENCV_FISHEYE", "PINHOLE", "SIMPLE_PINHOLE"):
        raise DatasetError(f"{where}: camera model {model} is not supported; convert the images "
                           f"to a pinhole camera first (for a COLMAP source: {UNDISTORT_HINT})")
    size = _checked(read_image_size, path)
    width, height = get("w", int, size[0]), get("h", int, size[1])
    if get("fl_x", float) is not None:
        fx = get("fl_x", float)
    elif get("camera_angle_x", float) is not None:
        fx = focal("camera_angle_x", width)
    else:
        raise DatasetError(f"{where}: no focal length (fl_x or camera_angle_x)")
    if get("fl_y", float) is not None:
        fy = get("fl_y", float)
    elif get("camera_angle_y", float) is not None and get("fl_x", float) is None:
        fy = focal("camera_angle_y", height)
    else:
        fy = fx
    cx, cy = get("cx", float, width / 2), get("cy", float, height / 2)
    ks = tuple(get(k, float, 0.0) for k in ("k1", "k2", "k3", "k4"))
    dist = None if fisheye else Distortion(ks, get("p1", float, 0.0), get("p2", float, 0.0))
    if fisheye:   # p1, p2 are no part of the fisheye model
        try:
            dist = fisheye_view(ks, width, height, fx, fy, cx, cy)
        except FisheyeError as exc:
            raise DatasetError(f"{where}: {exc}") from None
    elif dist.is_identity:
        dist = None
    ws, hs = _source_size(path, width, height, "the camera in transforms.json", size)
    view = dist.scale if isinstance(dist, Fisheye) else 1.0   # the pinhole view's focal
    try:
        cam = Camera(w2c, fx * view, fy * view, cx, cy, width, height, path.name, str(path))
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    return cam, _scaled_source(path, ws, hs, width, height, fx, fy, cx, cy, dist)


# --------------------------------------------------------------------------------- single image

def _load_single_image(path: Path):
    """2D fitting mode: one camera at the origin (identity pose) looking down +z at the plane
    z = 1, with fx = fy = 10·max(W,H) (nearly orthographic) and the principal point at the image
    centre, so the image fills the view: the plane shows [-W/2f, W/2f] × [-H/2f, H/2f].

    There is no point cloud: the trainer should initialise random points on that plane, e.g.
    uniformly inside :meth:`Dataset.bounds` (a zero-thickness box at z = 1) with random colours.
    """
    w, h = _checked(read_image_size, path)
    f = SINGLE_IMAGE_FOCAL_FACTOR * max(w, h)
    cam = Camera(np.eye(4), f, f, w / 2, h / 2, w, h, path.name, str(path))
    return [cam], [ImageSource(str(path), w, h, f, f, w / 2, h / 2, None)]
