"""The loaded scene (:class:`Dataset`): posed pinhole cameras (world-to-camera, OpenCV axes,
docs/design.md §2), an optional SfM point cloud, a train/test split, and the views' pixels and
masks served on demand. :func:`~wgsl_splat.data.datasets.load_dataset` builds one from a path.

:meth:`Dataset.preload` decodes every image once before training (a bad file is an error then, not
hours later) and keeps them resident as 8-bit within a memory budget; :meth:`Dataset.load_image`
serves them as float32, decoding the ones beyond the budget again.

- ``resolution=N`` shrinks every image by N with exact area averaging (a box filter that also
  handles sizes N does not divide; no cropping) and scales the cameras with :meth:`Camera.scaled`.
  Undistortion (:mod:`~wgsl_splat.data.sources`) runs at the source resolution, before the
  downscale.
- Processed images (downscaled and/or undistorted) are cached as 8-bit PNGs in
  ``<scene>/.wgsl_splat_cache/r<N>/<name>-<key>.png``; the key hashes the source's path, size and
  mtime and the processing, so a changed source is re-processed (its stale entry is deleted). When
  the scene folder is read-only (checked by its mode bits too, so that running as root does not
  write into shared data) the cache goes to ``$XDG_CACHE_HOME/wgsl_splat/<scene>-<hash>/r<N>``.
  Cold and cached loads return identical arrays (both go through the 8-bit quantisation).
- RGBA images are downscaled with premultiplied alpha and composited on ``background`` last.
- Masks: :mod:`~wgsl_splat.data.masks`.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..camera import Camera
from ..contract.losses import masked_target
from .images import (
    ImageCache,
    edge_pixels,
    image_has_alpha,
    read_image,
    resize_area,
    to_u8,
    undistort_image,
)
from .masks import alpha_keep, file_mask
from .scene import DatasetError, checked, listing
from .sources import ImageSource

NERF_SYNTHETIC_HALF_SIDE = 1.3    # 3DGS's random-init cube for Blender-layout scenes
_CACHE_VERSION = "1"
# Decoded images kept in memory by preload(), 8-bit (a quarter of float32): every training view
# of most scenes (300 views of 1080p take 1.9 GB); the held-out views, read once per evaluation,
# only up to a smaller budget.
TRAIN_RESIDENT_BYTES = 4 << 30
TEST_RESIDENT_BYTES = 512 << 20


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
    details: dict = field(default_factory=dict, init=False, repr=False)  # (i, max px) -> edges

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

    def edge_pixels(self, i: int, max_pixels: float = math.inf) -> float:
        """Camera ``i``'s detail, the length × contrast of its image's edges in pixels
        (:func:`~wgsl_splat.data.images.edge_pixels`; masked pixels left out), measured once."""
        key = (i, max_pixels)
        if key not in self.details:
            self.details[key] = edge_pixels(self.load_image(i), self.load_mask(i), max_pixels)
        return self.details[key]

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
                               f"({listing(names)}): nothing to train on (black mask pixels and "
                               f"alpha 0 are left out; check the masks, or use a smaller -r)")
        self.train_indices = train
        self.test_indices = [i for i in self.test_indices if i not in gone]
        self.notes.append(f"{names[0]} left out of training and scoring: its mask leaves no pixel "
                          f"{where}" if len(names) == 1 else
                          f"{len(names)} views left out of training and scoring: their masks "
                          f"leave no pixel {where}: {listing(names)}")

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
        keep = file_mask(src, (cam.height, cam.width)) if src.mask else None
        if self.alpha_mask and (pixels is not None or checked(image_has_alpha, src.path)):
            pixels = self._pixels(i) if pixels is None else pixels   # decoded only when RGBA
            if pixels.shape[2] == 4:
                alpha = alpha_keep(pixels)
                keep = alpha if keep is None else keep & alpha
        return None if keep is None or keep.all() else keep

    def _decode(self, src: ImageSource) -> np.ndarray:
        img = checked(read_image, src.path)
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
