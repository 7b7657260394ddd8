"""What a run starts from and what it checks before it starts: the initial model, the refusals a
new run gets before any image is decoded, and the scene's measures the run is scaled by (its
extent, how many values the training views observe, how much detail they show)."""

from __future__ import annotations

import math

import numpy as np

from ..model import SH_C0, GaussianModel, floats_per_gaussian
from ..strategy import Strategy, StrategyContext, StrategyError, make_strategy
from .config import TrainConfig
from .errors import TrainingError
from .evaluation import held_out_views


def initial_model(dataset, cfg: TrainConfig, rng: np.random.Generator, log,
                  strategy: Strategy | None = None) -> GaussianModel:
    """SfM points when the scene has them, with the background shell around them
    (:func:`background_shell`), otherwise random points inside the scene bounds, with the
    strategy's initial opacity and scale factor (ADC: 0.1 and 1; MCMC: 0.5 and 0.1).

    Random points get 3DGS's "random colours" (``readNerfSyntheticInfo``): SH DC coefficients drawn
    from [0, 1/255), i.e. a faint grey of 0.5 — a neutral fog that the first steps carve away,
    rather than saturated colours that must first be unlearned; the shell is that grey exactly
    (drawing nothing from ``rng``, so a point cloud's run keeps its view order).
    """
    init = {} if strategy is None else dict(initial_opacity=strategy.init_opacity,
                                             scale_factor=strategy.init_scale)
    if dataset.points is not None and len(dataset.points) > 0:
        shell = background_shell(dataset, cfg)
        log(f"init: {len(dataset.points)} points from the scene's point cloud"
            + (f", {len(shell)} on the background shell" if len(shell) else ""))
        points = np.concatenate([np.asarray(dataset.points, np.float64), shell])
        colors = np.concatenate([np.asarray(dataset.point_colors, np.float64),
                                 np.full((len(shell), 3), 0.5)])
        return GaussianModel.from_points(points, colors, sh_degree=cfg.sh_degree, **init)
    lo, hi = (np.asarray(b, dtype=np.float64) for b in dataset.bounds())
    n = initial_count(dataset, cfg, strategy)
    log(f"init: no point cloud, {n} random points in the scene bounds {np.round(lo, 3)}..{np.round(hi, 3)}")
    points = rng.uniform(lo, hi, size=(n, 3))
    colors = 0.5 + SH_C0 * rng.uniform(0.0, 1.0 / 255.0, size=(n, 3))
    return GaussianModel.from_points(points, colors, sh_degree=cfg.sh_degree, **init)


def background_shell(dataset, cfg: TrainConfig) -> np.ndarray:
    """The points a run from a point cloud adds for the background, (M, 3): ``background_fraction``
    × the cloud's points in directions spread evenly over a sphere (a Fibonacci lattice) around
    the training cameras' centre, at ``background_radius`` × the radius that holds every training
    camera and 99 % of the cloud; those no training view sees (in front of it, inside its image
    as a pinhole projects) are left out. Only training cameras decide: held-out views are not training data.

    SfM finds no points on what has no texture (a wall, a desk, the sky), and without a place to
    draw it a model grows it from the cloud's outliers into Gaussians the size of the scene that
    stand among the cameras: a held-out camera standing inside one sees nothing else
    (docs/benchmarks.md, issue 36). Empty for a single view (no sphere around one camera)."""
    train = [dataset.cameras[i] for i in dataset.train_indices]
    cloud = np.zeros((0, 3)) if dataset.points is None else np.asarray(dataset.points, np.float64)
    count = int(cfg.background_fraction * len(cloud))
    if count <= 0 or len(train) < 2:
        return np.zeros((0, 3))
    centers = np.stack([c.center for c in train])
    middle = centers.mean(axis=0)
    reach = float(np.linalg.norm(centers - middle, axis=1).max())
    reach = max(reach, float(np.percentile(np.linalg.norm(cloud - middle, axis=1), 99)))
    if not math.isfinite(reach) or reach <= 0.0:
        return np.zeros((0, 3))
    points = middle + cfg.background_radius * reach * fibonacci_sphere(count)
    seen = np.zeros(len(points), bool)
    for cam in train:
        seen |= cam.sees(points)
    return points[seen]


def fibonacci_sphere(n: int) -> np.ndarray:
    """``n`` unit vectors spread evenly over the sphere (the golden-angle spiral), (n, 3)."""
    k = np.arange(n) + 0.5
    z = 1.0 - 2.0 * k / n
    r = np.sqrt(np.maximum(1.0 - z * z, 0.0))
    phi = k * math.pi * (3.0 - math.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def initial_count(dataset, cfg: TrainConfig, strategy: Strategy | None = None) -> int:
    """How many Gaussians a new run starts from (:func:`initial_model`): the point cloud and its
    background shell, or the random points the strategy takes of ``random_init_points``."""
    if dataset.points is not None and len(dataset.points) > 0:
        return len(dataset.points) + len(background_shell(dataset, cfg))
    n = cfg.random_init_points
    return n if strategy is None else strategy.random_init_points(n)


def check_new_run(dataset, cfg: TrainConfig) -> None:
    """Refuse (:class:`TrainingError`) what a new run on ``dataset`` would be refused for after
    initialisation, before any image is decoded or anything is written: the configuration, and
    the strategy against the model the run starts from (e.g. MCMC's --cap-max below it)."""
    try:
        cfg.check()
        cfg.optim.for_batch(cfg.batch_size)
        strategy = make_strategy(cfg, StrategyContext(
            scene_extent(dataset), all(c >= 1.0 for c in cfg.background), cfg.seed,
            view_pixels=training_view_pixels(dataset),
            params_per_gaussian=floats_per_gaussian(cfg.sh_degree), iters=cfg.iters,
            log=lambda line: None))
        strategy.check(initial_count(dataset, cfg, strategy))
    except (ValueError, StrategyError) as exc:
        raise TrainingError(str(exc)) from None
    if not dataset.train_indices:
        raise TrainingError("the dataset has no training views")
    if cfg.appearance and dataset.test_indices and not held_out_views(dataset):
        raise TrainingError("--appearance with --eval: this split holds out no view that is not "
                            "also trained on (one view), so the evaluation would score colour "
                            "transforms fitted on the test view itself; drop one of the two")
    if cfg.pose_opt and len(dataset.train_indices) < 2:
        raise TrainingError("--pose-opt needs two or more training views: against one view a pose "
                            "correction only moves the camera with the scene (nothing to refine "
                            "it against); drop the flag")


def training_view_pixels(dataset) -> tuple[int, ...]:
    """Each training view's pixels (the strategies' budgets count what the views constrain)."""
    cams = dataset.cameras
    return tuple(cams[i].width * cams[i].height for i in dataset.train_indices)


def training_edge_pixels(dataset):
    """The training views' detail summed, a function of the pixels it is measured at
    (:meth:`~wgsl_splat.data.dataset.Dataset.edge_pixels`; the fast mode's budget). Decodes the
    images on first use: :func:`check_new_run` leaves it out (nothing it refuses depends on it)."""
    return lambda max_pixels: sum(dataset.edge_pixels(i, max_pixels)
                                  for i in dataset.train_indices)


def scene_extent(dataset) -> float:
    """The scene's size the means' learning rate and the strategies' thresholds scale with
    (:meth:`~wgsl_splat.data.dataset.Dataset.scene_extent`), or half the diagonal of its bounds
    when the cameras give none."""
    extent = float(dataset.scene_extent())
    if not math.isfinite(extent) or extent <= 1e-6:  # a single view: use the bounds instead
        lo, hi = (np.asarray(b, dtype=np.float64) for b in dataset.bounds())
        extent = max(float(np.linalg.norm(hi - lo)) / 2, 1e-3)
    return extent
