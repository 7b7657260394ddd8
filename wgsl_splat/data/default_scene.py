"""A built-in procedural scene: posed images and an SfM-like point cloud, no downloads needed.

A checkered ground square carries three textured spheres and a rotated checkered box, lit by a
fixed directional light (Lambertian with ambient term and hard shadows). Images are rendered by
analytic ray casting in NumPy, a method independent of the splat renderer, so a trained model can
be checked against ground truth that shares no code with it; pixels with an edge average several
rays, as a camera's pixel integrates the light over its area. Cameras sit on the upper hemisphere
looking at the centre (OpenCV convention). World up is +z; the ground is the plane z = 0.

Shading depends only on the surface point (no specular), so the colour of a surface point is the
same in every view, as 3DGS's SH-degree-0 colours and the point cloud's colours assume.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..camera import Camera

__all__ = ["PIXEL_SAMPLES", "SceneData", "make_default_scene", "raycast", "scene_extent",
           "WORLD_UP"]

WORLD_UP = np.array([0.0, 0.0, 1.0])
_LIGHT_DIR = np.array([0.45, 0.3, 1.0]) / np.linalg.norm([0.45, 0.3, 1.0])  # towards the light
_AMBIENT = 0.3
_EPS = 1e-6
_TARGET = np.array([0.0, 0.0, 0.35])  # the cameras' look-at point: middle of the objects' height
# Rays per pixel along each axis for the scene's images. A camera's pixel integrates the light
# over its area; one ray through its centre samples textures finer than a pixel (the box's cells,
# the far ground's checker edges) in a pattern that differs from view to view, which a model
# can fit in the training views but never predict in a held-out one.
PIXEL_SAMPLES = 3
# Neighbouring pixel centres closer in colour than this are on smoothly shaded surface.
_SMOOTH_STEP = 0.05


@dataclass
class SceneData:
    """Posed images and an initial point cloud, the inputs a 3DGS trainer needs."""

    cameras: list[Camera]
    images: list[np.ndarray]   # (H,W,3) float32 in [0,1]
    points: np.ndarray         # (M,3) float64 world positions
    colors: np.ndarray         # (M,3) float32 in [0,1]
    name: str
    background: np.ndarray     # (3,) colour of pixels whose ray hits nothing


# ------------------------------------------------------------------------------------------------
# primitives: each intersects a batch of rays and gives normals, albedo and area samples
# ------------------------------------------------------------------------------------------------

def _checker(*coords: np.ndarray, size: float) -> np.ndarray:
    """Boolean checkerboard over any number of coordinates with cells of ``size``."""
    return (sum(np.floor(c / size).astype(np.int64) for c in coords) % 2).astype(bool)


def _pick(mask: np.ndarray, a, b) -> np.ndarray:
    return np.where(mask[:, None], np.asarray(a, np.float64), np.asarray(b, np.float64))


class _Ground:
    """The square |x|, |y| <= half on z = 0, a large grey checkerboard."""

    def __init__(self, half: float):
        self.half = half
        self.area = (2 * half) ** 2

    def hit(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            t = -o[:, 2] / d[:, 2]
        p = o[:, :2] + t[:, None] * d[:, :2]
        ok = (t > _EPS) & (np.abs(p) <= self.half).all(axis=1)
        return np.where(ok, t, np.inf)

    def normal(self, p: np.ndarray) -> np.ndarray:
        return np.broadcast_to(WORLD_UP, p.shape)

    def albedo(self, p: np.ndarray) -> np.ndarray:
        return _pick(_checker(p[:, 0], p[:, 1], size=0.5), (0.85, 0.82, 0.75), (0.25, 0.3, 0.38))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.column_stack([rng.uniform(-self.half, self.half, (n, 2)), np.zeros(n)])


class _Sphere:
    """A sphere with a texture given as a function of the unit normal."""

    def __init__(self, center, radius: float, texture):
        self.center, self.radius, self.texture = np.asarray(center, np.float64), radius, texture
        self.area = 4 * np.pi * radius**2

    def hit(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        # |o + t d - c|^2 = r^2  ->  a t^2 + 2 b t + c = 0 (d need not be unit length).
        oc = o - self.center
        b = np.einsum("ij,ij->i", oc, d)
        c = np.einsum("ij,ij->i", oc, oc) - self.radius**2
        a = np.einsum("ij,ij->i", d, d)
        disc = b * b - a * c
        t = np.full(len(o), np.inf)
        # Most rays miss a given sphere: take roots only where the discriminant allows a hit.
        h = np.flatnonzero(disc >= 0)
        root = np.sqrt(disc[h])
        t0, t1 = (-b[h] - root) / a[h], (-b[h] + root) / a[h]
        th = np.where(t0 > _EPS, t0, t1)  # the far root only matters for rays starting inside
        t[h] = np.where(th > _EPS, th, np.inf)
        return t

    def normal(self, p: np.ndarray) -> np.ndarray:
        return (p - self.center) / self.radius

    def albedo(self, p: np.ndarray) -> np.ndarray:
        return self.texture(self.normal(p))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        v = rng.normal(size=(n, 3))
        return self.center + self.radius * v / np.linalg.norm(v, axis=1, keepdims=True)


class _Box:
    """A box rotated by ``yaw`` about the world z axis, with a solid 3D checker texture."""

    def __init__(self, center, half_size, yaw_deg: float, colors, cell: float):
        self.center, self.half = np.asarray(center, np.float64), np.asarray(half_size, np.float64)
        c, s = np.cos(np.radians(yaw_deg)), np.sin(np.radians(yaw_deg))
        self.rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])  # local -> world
        self.colors, self.cell = colors, cell
        self.bound = _Sphere(self.center, float(np.linalg.norm(self.half)) * 1.001, None)
        hx, hy, hz = 2 * self.half
        self.face_area = np.array([hy * hz, hx * hz, hx * hy])  # faces normal to local x, y, z
        self.area = 2 * self.face_area.sum()

    def _local(self, p: np.ndarray) -> np.ndarray:
        return (p - self.center) @ self.rot  # row-vector form of rotᵀ (p - c)

    def hit(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        # The box covers a small part of each view: run the slab test only on the rays that hit
        # its bounding sphere (a cheap test; rays starting inside it hit its far side).
        t = np.full(len(o), np.inf)
        cand = np.flatnonzero(np.isfinite(self.bound.hit(o, d)))
        if len(cand) == 0:
            return t
        # Slab test in the box frame, one coordinate at a time (column-wise ops beat axis-1
        # reductions over length-3 rows).
        lo, ld = self._local(o[cand]).T, (d[cand] @ self.rot).T
        tnear, tfar = np.full(len(cand), -np.inf), np.full(len(cand), np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(3):
                inv = 1.0 / ld[k]
                ta, tb = (-self.half[k] - lo[k]) * inv, (self.half[k] - lo[k]) * inv
                # 0·inf (ray parallel to a slab, on its plane) gives NaN; fmin/fmax skip NaN.
                tnear = np.fmax(tnear, np.fmin(ta, tb))
                tfar = np.fmin(tfar, np.fmax(ta, tb))
        tc = np.where(tnear > _EPS, tnear, tfar)
        t[cand] = np.where((tnear <= tfar) & (tc > _EPS), tc, np.inf)
        return t

    def normal(self, p: np.ndarray) -> np.ndarray:
        q = self._local(p) / self.half
        axis = np.argmax(np.abs(q), axis=1)
        n = np.zeros_like(q)
        n[np.arange(len(q)), axis] = np.sign(q[np.arange(len(q)), axis])
        return n @ self.rot.T

    def albedo(self, p: np.ndarray) -> np.ndarray:
        q = self._local(p) + self.half  # offset so cells line up with the box's corner
        return _pick(_checker(q[:, 0], q[:, 1], q[:, 2], size=self.cell), *self.colors)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        face = rng.choice(3, size=n, p=self.face_area / self.face_area.sum())
        q = rng.uniform(-1.0, 1.0, (n, 3))
        q[np.arange(n), face] = rng.choice([-1.0, 1.0], size=n)
        return (q * self.half) @ self.rot.T + self.center


def _stripes(n: np.ndarray) -> np.ndarray:
    """Red and cream horizontal bands."""
    band = np.floor((n[:, 2] + 1.0) * 4.0).astype(np.int64) % 2 == 0
    return _pick(band, (0.85, 0.15, 0.12), (0.95, 0.88, 0.7))


def _lat_long_checker(n: np.ndarray) -> np.ndarray:
    """Blue and yellow checker in longitude/latitude, like a beach ball."""
    lon = np.arctan2(n[:, 1], n[:, 0])
    lat = np.arcsin(np.clip(n[:, 2], -1.0, 1.0))
    return _pick(_checker(lon, lat, size=np.pi / 5), (0.12, 0.3, 0.85), (0.95, 0.8, 0.15))


def _meridians(n: np.ndarray) -> np.ndarray:
    """Green with dark meridian segments."""
    lon = np.arctan2(n[:, 1], n[:, 0])
    seg = np.floor(lon / (np.pi / 6)).astype(np.int64) % 2 == 0
    return _pick(seg, (0.2, 0.7, 0.3), (0.05, 0.25, 0.1))


def _build_scene() -> list:
    # Objects sit on the ground (sphere centre z = radius, box centre z = half height) within a
    # radius of ~1.3 of the origin, so a ring of cameras at distance ~4 frames them well.
    return [
        _Ground(2.5),
        _Sphere((-0.75, -0.45, 0.5), 0.5, _stripes),
        _Sphere((0.85, -0.35, 0.42), 0.42, _lat_long_checker),
        _Sphere((-0.1, 0.95, 0.33), 0.33, _meridians),
        _Box((0.55, 0.7, 0.3), (0.3, 0.22, 0.3), 25.0,
             ((0.95, 0.55, 0.1), (0.45, 0.2, 0.05)), cell=0.15),
    ]


# ------------------------------------------------------------------------------------------------
# ray casting and shading
# ------------------------------------------------------------------------------------------------

def _cast(prims: list, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit over all primitives: (t, index of the primitive, -1 for a miss)."""
    ts = np.stack([p.hit(o, d) for p in prims])
    idx = np.argmin(ts, axis=0)
    t = ts[idx, np.arange(len(o))]
    return t, np.where(np.isfinite(t), idx, -1)


def _shade(prims: list, p: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Lambertian colour of surface points ``p`` lying on primitives ``idx`` (hard shadows)."""
    normal = np.empty_like(p)
    albedo = np.empty_like(p)
    for i, prim in enumerate(prims):
        sel = idx == i
        if sel.any():
            normal[sel] = prim.normal(p[sel])
            albedo[sel] = prim.albedo(p[sel])
    cos = normal @ _LIGHT_DIR
    lit = cos > 0
    # Shadow rays toward the light, started just off the surface to avoid self-hits. The ground
    # cannot shadow anything (light from above), so it is left out.
    if lit.any():
        origins = p[lit] + 1e-4 * normal[lit]
        dirs = np.broadcast_to(_LIGHT_DIR, origins.shape)
        blocked = np.zeros(len(origins), bool)
        for prim in prims[1:]:
            blocked |= np.isfinite(prim.hit(origins, dirs))
        lit[np.flatnonzero(lit)[blocked]] = False
    light = _AMBIENT + (1.0 - _AMBIENT) * np.where(lit, cos, 0.0)
    return albedo * light[:, None]


def _camera_rays(cam: Camera, offsets=(0.5,),
                 pixels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """World-space rays through the points ``offsets`` × ``offsets`` of each pixel (0.5: its
    centre) of ``pixels`` (flat row-major indices; default all), a pixel's rays consecutive.

    The directions are not normalised: their camera-space z is 1, so the hit parameter t is the
    OpenCV depth z of the hit point, which makes depth maps and projection checks direct.
    """
    if pixels is None:
        pixels = np.arange(cam.width * cam.height)
    off = np.asarray(offsets, np.float64)
    ov, ou = (x.ravel() for x in np.meshgrid(off, off, indexing="ij"))
    uu = (pixels % cam.width)[:, None] + ou
    vv = (pixels // cam.width)[:, None] + ov
    d_cam = np.stack([(uu - cam.cx) / cam.fx, (vv - cam.cy) / cam.fy, np.ones_like(uu)], axis=-1)
    d = d_cam.reshape(-1, 3) @ cam.rotation  # row-vector form of Rᵀ d_cam
    return np.broadcast_to(cam.center, d.shape), d


def _colors(prims: list, o: np.ndarray, d: np.ndarray, background: np.ndarray):
    """Shaded colours (clipped to [0, 1]), hit depths and primitive indices of rays."""
    t, idx = _cast(prims, o, d)
    color = np.empty_like(d)
    color[:] = background
    hit = idx >= 0
    color[hit] = _shade(prims, o[hit] + t[hit, None] * d[hit], idx[hit])
    return np.clip(color, 0.0, 1.0), t, idx


def _discontinuous(img: np.ndarray, idx: np.ndarray, tolerance: float) -> np.ndarray:
    """Pixels whose centre differs from one of its 8 neighbours' in primitive or colour."""
    h, w = idx.shape
    pad_i = np.pad(idx, 1, mode="edge")
    pad_c = np.pad(img, ((1, 1), (1, 1), (0, 0)), mode="edge")
    out = np.zeros((h, w), bool)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            out |= pad_i[dy:dy + h, dx:dx + w] != idx
            out |= (np.abs(pad_c[dy:dy + h, dx:dx + w] - img) > tolerance).any(axis=-1)
    return out


def raycast(cameras: Camera | list[Camera], background=(0.0, 0.0, 0.0), *,
            samples: int = 1, return_depth: bool = False):
    """Ray-cast the default scene from ``cameras`` (one camera or a list).

    Returns (H,W,3) float32 images in [0,1] (a list for a list of cameras); with
    ``return_depth`` also (H,W) float64 OpenCV depth maps along the pixel centres, +inf where
    nothing is hit. ``samples`` > 1 antialiases as a camera's pixel integrates light over its
    area: a pixel whose centre differs from a neighbour's (an edge, a shadow's border, a texture
    cell) is the mean of a stratified ``samples`` × ``samples`` grid of rays; elsewhere shading
    varies smoothly and the centre is the pixel's mean.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    single = isinstance(cameras, Camera)
    cams = [cameras] if single else list(cameras)
    prims = _build_scene()
    background = np.asarray(background, np.float64)
    images, depths = [], []
    for c in cams:
        color, t, idx = _colors(prims, *_camera_rays(c), background)
        img = color.reshape(c.height, c.width, 3)
        if samples > 1:
            pixels = np.flatnonzero(_discontinuous(img, idx.reshape(c.height, c.width),
                                                   _SMOOTH_STEP))
            offsets = (np.arange(samples) + 0.5) / samples
            sub, _, _ = _colors(prims, *_camera_rays(c, offsets, pixels), background)
            img.reshape(-1, 3)[pixels] = sub.reshape(len(pixels), samples * samples, 3).mean(1)
        images.append(img.astype(np.float32))
        depths.append(t.reshape(c.height, c.width))
    if single:
        images, depths = images[0], depths[0]
    return (images, depths) if return_depth else images


# ------------------------------------------------------------------------------------------------
# cameras, point cloud, scene
# ------------------------------------------------------------------------------------------------

def _ring_cameras(num: int, width: int, height: int) -> list[Camera]:
    """``num`` cameras around the scene at three alternating elevations, looking at its centre."""
    cams = []
    for i in range(num):
        azimuth = 2 * np.pi * i / num
        elevation = np.radians((22.0, 38.0, 55.0)[i % 3])
        radius = 4.0
        eye = _TARGET + radius * np.array([np.cos(elevation) * np.cos(azimuth),
                                           np.cos(elevation) * np.sin(azimuth),
                                           np.sin(elevation)])
        cams.append(Camera.look_at(eye, _TARGET, up=WORLD_UP, fov_x_deg=50.0, width=width,
                                   height=height, name=f"view_{i:03d}"))
    return cams


def _visible_counts(prims: list, cams: list[Camera], pts: np.ndarray) -> np.ndarray:
    """How many cameras see each point: inside the image and not occluded."""
    counts = np.zeros(len(pts), np.int64)
    for cam in cams:
        pc = pts @ cam.rotation.T + cam.translation
        z = pc[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = cam.fx * pc[:, 0] / z + cam.cx
            v = cam.fy * pc[:, 1] / z + cam.cy
        inside = (z > 0.01) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)
        sel = np.flatnonzero(inside)
        # Ray from the camera with camera-space z = 1 direction: t equals depth, so the point is
        # visible when nothing is hit noticeably before its own depth.
        d = (pts[sel] - cam.center) / z[sel, None]
        t, _ = _cast(prims, np.broadcast_to(cam.center, d.shape), d)
        counts[sel] += t >= z[sel] * (1.0 - 1e-6) - 1e-6
    return counts


def _sample_points(prims: list, cams: list[Camera], num: int, rng: np.random.Generator):
    """SfM-like points: surface samples seen by at least two cameras, shaded colours + noise."""
    # Textured objects get more points than their area alone would give, as SfM finds more
    # features on them than on the large ground.
    weights = np.array([p.area for p in prims])
    weights[0] *= 0.3
    weights /= weights.sum()
    pts_all, idx_all, have = [np.empty((0, 3))], [np.empty(0, np.int64)], 0
    while have < num:
        batch = max(2 * (num - have), 64)
        idx = rng.choice(len(prims), size=batch, p=weights)
        pts = np.empty((batch, 3))
        for i, prim in enumerate(prims):
            sel = idx == i
            pts[sel] = prim.sample(int(sel.sum()), rng)
        keep = _visible_counts(prims, cams, pts) >= 2
        pts_all.append(pts[keep])
        idx_all.append(idx[keep])
        have += int(keep.sum())
    pts = np.concatenate(pts_all)[:num]
    idx = np.concatenate(idx_all)[:num]
    colors = _shade(prims, pts, idx)
    # Reconstruction noise: small against the objects (~0.5% of the scene size) and the colours.
    pts = pts + rng.normal(0.0, 0.01, pts.shape)
    colors = np.clip(colors + rng.normal(0.0, 0.02, colors.shape), 0.0, 1.0)
    return pts, colors.astype(np.float32)


def make_default_scene(width: int = 128, height: int = 128, num_cameras: int = 24,
                       num_points: int = 3000, seed: int = 0, *,
                       background=(0.0, 0.0, 0.0), samples: int = PIXEL_SAMPLES) -> SceneData:
    """Build the default scene: ray-cast images, cameras and a point cloud.

    Deterministic for a given ``seed``; the cameras and images do not depend on it, only the point
    cloud does. Cameras are named ``view_000`` … so sorting by name keeps their order.
    ``samples``: rays along a pixel's side where the pixel holds an edge (see :func:`raycast`).
    """
    if num_cameras < 2:
        raise ValueError("the default scene needs at least 2 cameras")
    rng = np.random.default_rng(seed)
    prims = _build_scene()
    cams = _ring_cameras(num_cameras, width, height)
    background = np.asarray(background, np.float32).reshape(3)
    images = raycast(cams, background, samples=samples)
    points, colors = _sample_points(prims, cams, num_points, rng)
    return SceneData(cams, images, points, colors, "default_scene", background)


def scene_extent(cameras: list[Camera]) -> float:
    """3DGS "cameras_extent": 1.1 × the largest distance of a camera centre from their mean.

    The learning rate of the means and the densification thresholds scale with it.
    """
    centers = np.stack([c.center for c in cameras])
    return float(1.1 * np.linalg.norm(centers - centers.mean(axis=0), axis=1).max())


def default_dataset(*, resolution: int = 1, eval_split: bool = False, width: int = 192, height: int = 192,
                    num_cameras: int = 32, num_points: int = 3000, background=(0.0, 0.0, 0.0)):
    """The embedded scene as a :class:`~wgsl_splat.data.dataset.Dataset` (what ``train`` uses when no
    data path is given): ``width``×``height`` divided by ``resolution``, every 8th view held out
    with ``eval_split``."""
    from .dataset import Dataset
    from .sources import check_downscale

    check_downscale(resolution, [(width, height)])
    scene = make_default_scene(max(8, int(width // resolution)), max(8, int(height // resolution)),
                               num_cameras=num_cameras, num_points=num_points, background=background)
    n = len(scene.cameras)
    test = [i for i in range(n) if i % 8 == 0] if eval_split else []
    train = [i for i in range(n) if i not in set(test)]
    return Dataset(cameras=scene.cameras, points=scene.points, point_colors=scene.colors,
                   train_indices=train, test_indices=test, background=scene.background,
                   kind="embedded", notes=[f"embedded default scene ({n} ray-cast views)"],
                   root="<embedded>", resolution=resolution, memory_images=scene.images)
