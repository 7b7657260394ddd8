"""Gaussian model parameters, stored exactly as the design's table (docs/design.md §2)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

SH_C0 = 0.28209479177387814
PARAM_GROUPS = ("means", "log_scales", "quats", "opacity_logits", "sh")
PARAM_FLOATS = 11   # per Gaussian before its SH: mean 3, log-scale 3, quaternion 4, opacity 1


def num_sh_coeffs(degree: int) -> int:
    if not 0 <= degree <= 3:
        raise ValueError(f"SH degree must be 0..3, got {degree}")
    return (degree + 1) ** 2


def floats_per_gaussian(degree: int) -> int:
    """Trained floats per Gaussian (59 at SH degree 3): the flat ``params`` record of the GPU path."""
    return PARAM_FLOATS + 3 * num_sh_coeffs(degree)


def param_offsets(n: int) -> tuple[int, int, int, int]:
    """Float offsets of log-scales, quaternions, opacity logits and SH in the flat ``params`` record
    of ``n`` Gaussians (means first, then each group after the other, what the shaders index)."""
    return (3 * n, 6 * n, 10 * n, PARAM_FLOATS * n)


def sh_degree_from_coeffs(k: int) -> int:
    for d in range(4):
        if (d + 1) ** 2 == k:
            return d
    raise ValueError(f"{k} SH coefficients do not match any degree 0..3")


def rgb_to_sh_dc(rgb: np.ndarray) -> np.ndarray:
    """DC coefficient whose colour is ``rgb`` (inverse of c = SH_C0·dc + 0.5)."""
    return (np.asarray(rgb) - 0.5) / SH_C0


def inverse_sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.clip(np.asarray(x, dtype=np.float64), 1e-7, 1 - 1e-7)
    return np.log(x / (1 - x))


@dataclass
class GaussianModel:
    """N anisotropic Gaussians.

    means (N,3) world space; log_scales (N,3); quats (N,4) w,x,y,z unnormalised;
    opacity_logits (N,); sh (N,K,3) with K = (degree+1)^2, coefficient 0 is the DC term.
    The same container holds gradients and Adam moments (same shapes).
    """

    means: np.ndarray
    log_scales: np.ndarray
    quats: np.ndarray
    opacity_logits: np.ndarray
    sh: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.means)
        shapes = {"means": (n, 3), "log_scales": (n, 3), "quats": (n, 4), "opacity_logits": (n,)}
        for name, shape in shapes.items():
            arr = getattr(self, name)
            if arr.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
        if self.sh.ndim != 3 or self.sh.shape[0] != n or self.sh.shape[2] != 3:
            raise ValueError(f"sh must have shape (N,K,3), got {self.sh.shape}")
        sh_degree_from_coeffs(self.sh.shape[1])

    # -- basic properties -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.means)

    @property
    def num(self) -> int:
        return len(self.means)

    @property
    def sh_degree(self) -> int:
        return sh_degree_from_coeffs(self.sh.shape[1])

    @property
    def dtype(self):
        return self.means.dtype

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- activations --------------------------------------------------------------------------------
    @property
    def scales(self) -> np.ndarray:
        return np.exp(self.log_scales)

    @property
    def opacities(self) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.opacity_logits))

    @property
    def normalized_quats(self) -> np.ndarray:
        return self.quats / np.linalg.norm(self.quats, axis=1, keepdims=True)

    # -- construction -------------------------------------------------------------------------------
    def map(self, fn) -> "GaussianModel":
        return GaussianModel(**{k: fn(v) for k, v in self.arrays().items()})

    def copy(self) -> "GaussianModel":
        return self.map(np.copy)

    def astype(self, dtype) -> "GaussianModel":
        return self.map(lambda a: np.ascontiguousarray(a, dtype=dtype))

    def zeros_like(self) -> "GaussianModel":
        return self.map(np.zeros_like)

    def subset(self, index) -> "GaussianModel":
        return self.map(lambda a: a[index])

    @staticmethod
    def concatenate(models: list["GaussianModel"]) -> "GaussianModel":
        first = models[0]
        return GaussianModel(**{k: np.concatenate([m.arrays()[k] for m in models])
                                for k in first.arrays()})

    def with_sh_degree(self, degree: int) -> "GaussianModel":
        """Copy with SH truncated or zero-padded to ``degree``."""
        k = num_sh_coeffs(degree)
        sh = np.zeros((self.num, k, 3), dtype=self.sh.dtype)
        m = min(k, self.sh.shape[1])
        sh[:, :m] = self.sh[:, :m]
        out = self.copy()
        out.sh = sh
        return out

    @staticmethod
    def empty(sh_degree: int = 3, dtype=np.float32) -> "GaussianModel":
        k = num_sh_coeffs(sh_degree)
        return GaussianModel(np.zeros((0, 3), dtype), np.zeros((0, 3), dtype), np.zeros((0, 4), dtype),
                             np.zeros((0,), dtype), np.zeros((0, k, 3), dtype))

    @staticmethod
    def random(n: int, rng: np.random.Generator, *, extent: float = 1.0, center=(0.0, 0.0, 0.0),
               sh_degree: int = 3, scale_range=(0.02, 0.2), dtype=np.float64) -> "GaussianModel":
        """Random Gaussians in a cube of half-size ``extent``; used by tests and benchmarks."""
        k = num_sh_coeffs(sh_degree)
        means = np.asarray(center) + rng.uniform(-extent, extent, (n, 3))
        log_scales = np.log(rng.uniform(*scale_range, (n, 3)) * extent)
        quats = rng.normal(size=(n, 4))
        opacity_logits = rng.normal(0.0, 1.5, n)
        sh = rng.normal(0.0, 0.3, (n, k, 3))
        sh[:, 0] = rgb_to_sh_dc(rng.uniform(0.05, 0.95, (n, 3)))
        return GaussianModel(means, log_scales, quats, opacity_logits, sh).astype(dtype)

    @staticmethod
    def from_points(points: np.ndarray, colors: np.ndarray, *, sh_degree: int = 3,
                    initial_opacity: float = 0.1, scale_factor: float = 1.0,
                    dtype=np.float32) -> "GaussianModel":
        """Initialise from an SfM point cloud (colours in [0,1]): scale = ``scale_factor`` × the
        square root of the mean squared distance to the 3 nearest neighbours, identity rotation,
        opacity ``initial_opacity`` (3DGS: 0.1), DC from colour."""
        points = np.asarray(points, dtype=np.float64)
        n = len(points)
        if n == 0:
            raise ValueError("cannot initialise Gaussians from an empty point cloud")
        d2 = knn_mean_sq_dist(points, k=3)
        log_scales = np.repeat(np.log(scale_factor * np.sqrt(np.maximum(d2, 1e-7)))[:, None], 3, axis=1)
        quats = np.zeros((n, 4))
        quats[:, 0] = 1.0
        opacity_logits = np.full(n, inverse_sigmoid(initial_opacity))
        sh = np.zeros((n, num_sh_coeffs(sh_degree), 3))
        sh[:, 0] = rgb_to_sh_dc(np.asarray(colors, dtype=np.float64))
        return GaussianModel(points, log_scales, quats, opacity_logits, sh).astype(dtype)


def knn_mean_sq_dist(points: np.ndarray, k: int = 3, brute_force_below: int = 8192) -> np.ndarray:
    """Mean squared distance to the ``k`` nearest other points, exactly.

    Small clouds: brute force. Larger ones: points are hashed into cubic cells of side h; the
    candidates of a point are those of its 27 neighbouring cells, which contain every point closer
    than h. Where the k-th candidate is farther than h the neighbourhood is not provably complete
    and the point is retried on a grid of twice the cell size (brute force only if h outgrows the
    cloud). h starts at 1.5x the median k-NN distance of a sample, not from the bounding box,
    which outliers inflate. Linear instead of quadratic: SfM clouds and 3DGS's 100k random
    initialisation are this large.
    """
    points = np.asarray(points, dtype=np.float64)
    n = len(points)
    if n <= 1:
        return np.full(n, 1e-2)
    k = min(k, n - 1)
    if n <= brute_force_below:
        return _knn_brute(points, np.arange(n), k)
    sample = np.random.default_rng(0).choice(n, size=256, replace=False)
    h = 1.5 * float(np.sqrt(np.median(_knn_brute(points, sample, k))))
    span = float((points.max(axis=0) - points.min(axis=0)).max())
    h = max(h, span / 2 ** 20, 1e-12)      # keeps the cell grid addressable in int64
    out = np.empty(n)
    todo = np.arange(n)
    while len(todo) and h < span:
        todo = _knn_grid_pass(points, todo, k, h, out)
        h *= 2.0
    if len(todo):
        out[todo] = _knn_brute(points, todo, k)
    return out


def _knn_grid_pass(points: np.ndarray, todo: np.ndarray, k: int, h: float, out: np.ndarray) -> np.ndarray:
    """Fill ``out`` for the points of ``todo`` whose k nearest neighbours provably lie in their
    27-cell neighbourhood on a grid of side ``h``; returns the others."""
    cell = np.floor((points - points.min(axis=0)) / h).astype(np.int64)
    dims = cell.max(axis=0) + 1
    key = (cell[:, 0] * dims[1] + cell[:, 1]) * dims[2] + cell[:, 2]
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    offsets = [np.array((a, b, c)) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]

    def neighbour_ranges(idx, off):
        nc = cell[idx] + off
        valid = np.all((nc >= 0) & (nc < dims), axis=1)
        nk = (nc[:, 0] * dims[1] + nc[:, 1]) * dims[2] + nc[:, 2]
        a = np.searchsorted(sorted_key, nk, "left")
        return a, np.where(valid, np.searchsorted(sorted_key, nk, "right") - a, 0)

    todo = todo[np.argsort(key[todo], kind="stable")]     # neighbours share cells: cache-friendly
    per_point = sum(neighbour_ranges(todo, off)[1] for off in offsets)
    budget = 4_000_000                                   # candidate pairs per chunk (memory)
    cuts = np.searchsorted(np.cumsum(per_point), np.arange(budget, int(per_point.sum()), budget))
    failed = []
    for idx in np.split(todo, cuts):
        if len(idx) == 0:
            continue
        pairs_i, pairs_j = [], []
        for off in offsets:
            a, cnt = neighbour_ranges(idx, off)
            rank = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            pairs_i.append(np.repeat(idx, cnt))
            pairs_j.append(order[np.repeat(a, cnt) + rank])
        ii, jj = np.concatenate(pairs_i), np.concatenate(pairs_j)
        keep = ii != jj
        ii, jj = ii[keep], jj[keep]
        diff = points[ii] - points[jj]
        d2 = np.einsum("ij,ij->i", diff, diff)
        srt = np.lexsort((d2, ii))
        ii, d2 = ii[srt], d2[srt]
        idx = np.sort(idx)
        first = np.searchsorted(ii, idx, "left")
        ok = np.searchsorted(ii, idx, "right") - first >= k
        kth = np.full(len(idx), np.inf)
        kth[ok] = d2[first[ok] + k - 1]
        ok &= kth <= h * h          # every point closer than h is among the candidates
        out[idx[ok]] = d2[first[ok][:, None] + np.arange(k)[None, :]].mean(axis=1)
        failed.append(idx[~ok])
    return np.concatenate(failed) if failed else todo[:0]


def _knn_brute(points: np.ndarray, which: np.ndarray, k: int) -> np.ndarray:
    """Mean squared distance of ``points[which]`` to their ``k`` nearest other points (brute force,
    in chunks of rows sized to about 256 MB)."""
    out = np.empty(len(which))
    sq = np.einsum("ij,ij->i", points, points)
    chunk = max(1, (1 << 25) // max(len(points), 1))
    for s in range(0, len(which), chunk):
        w = which[s:s + chunk]
        d2 = sq[w, None] + sq[None, :] - 2.0 * points[w] @ points.T
        d2[np.arange(len(w)), w] = np.inf
        part = np.partition(d2, k - 1, axis=1)[:, :k]
        out[s:s + chunk] = np.maximum(part, 0).mean(axis=1)
    return out
