"""Whether a run is healthy: nothing non-finite is ever written, and a run that diverged or
collapsed stops with its last good checkpoint intact instead of writing its state.

The checks are :func:`divergence` (before every PLY and checkpoint) and :func:`check_loss` (every
loss read); :func:`empty_image_loss` is the collapse check's yardstick, measured at start-up.
"""

from __future__ import annotations

import math

import numpy as np

from ..model import GaussianModel
from .config import TrainConfig
from .errors import TrainingError

# A Gaussian this many times larger than the scene (the camera rig's radius) has blown up: healthy
# runs stay under ~1x (the embedded scene: 0.1x), a 100x learning rate reached 5000x-5e7x.
EXPLODED_SCALE = 1000.0
# A model that renders no better than the background alone (its training loss at least this share
# of the empty image's) while fewer than COLLAPSED_COUNT of its starting Gaussians are left has
# collapsed: mouse -r 8 at 300x-1000x --lr-scale ended there (loss 0.689 of the empty 0.691, N 152
# of 4 443, 4.1 dB) and exited 0. Healthy runs stay far below (mouse: 0.09-0.55 after a reset).
COLLAPSED_LOSS = 0.95
COLLAPSED_COUNT = 0.1


def nonfinite_groups(model: GaussianModel) -> list[str]:
    """Names of the parameter arrays holding NaN or infinity."""
    return [k for k, v in model.arrays().items() if not np.all(np.isfinite(v))]


def divergence(model: GaussianModel, extent: float, loss_first: float | None,
               loss_now: float | None, empty_loss: float | None,
               initial_n: int | None) -> str | None:
    """What is wrong with ``model`` (None: nothing), given the scene ``extent``, this session's
    first and current training loss, the empty image's loss and the run's starting count.

    Diverged: a parameter is not finite, or the run collapsed without overflowing (what a 100x
    learning rate does on the embedded scene): the training loss is no lower than at the start
    while Gaussians grew to over :data:`EXPLODED_SCALE` times the scene (both conditions, so
    that neither the loss spike after an opacity reset nor one huge background Gaussian of a
    good run trips it), or the model collapsed to nothing: it renders no better than the
    background alone while pruning left under :data:`COLLAPSED_COUNT` of its starting
    Gaussians (both, again: the loss after an opacity reset approaches the empty image's, a
    pruned random initialisation loses most of its points), or nothing is left of it."""
    bad = nonfinite_groups(model)
    problem = f"parameters {', '.join(bad)} are not finite" if bad else None
    if len(model) == 0:
        problem = "no Gaussian is left (densification pruned them all)"
    excess = float(np.max(model.log_scales, initial=-np.inf)) - math.log(extent)
    first, now = loss_first, loss_now
    if (not bad and excess > math.log(EXPLODED_SCALE) and first is not None
            and now is not None and now >= first):
        problem = (f"the training loss went from {first:.3f} to {now:.3f} while Gaussians grew "
                   f"to {math.exp(min(excess, 700.0)):.0e} times the scene extent")
    empty, start_n = empty_loss, initial_n
    if (not problem and now is not None and empty and start_n
            and now >= COLLAPSED_LOSS * empty and len(model) < COLLAPSED_COUNT * start_n):
        problem = (f"the model collapsed: it renders no better than the background alone "
                   f"(training loss {now:.3f}, the empty image's {empty:.3f}) and {len(model)} "
                   f"of its {start_n} starting Gaussians are left")
    return problem


def check_loss(loss: float, iteration: int, last_good: str | None) -> None:
    """A non-finite training loss ends the run, naming the last good checkpoint."""
    if not math.isfinite(loss):
        raise TrainingError(
            f"the loss became {loss} by step {iteration}: training diverged. The last good "
            f"checkpoint is {last_good or 'none (diverged before the first checkpoint)'}; "
            f"resume from it with lower learning rates or report the scene.")


def empty_image_loss(dataset, cfg: TrainConfig, views: int = 8) -> float:
    """The image loss of a model that renders nothing (the background alone), averaged over up to
    ``views`` training views spread over the set: what a model that collapsed to nothing scores."""
    from ..reference.loss import loss_and_grad

    ids = dataset.train_indices
    pick = sorted({ids[int(k)] for k in np.linspace(0, len(ids) - 1, min(views, len(ids))).round()})
    lam = cfg.loss.lambda_dssim
    losses = []
    for i in pick:
        gt = np.asarray(dataset.load_target(i), np.float32)
        empty = np.broadcast_to(np.asarray(cfg.background, np.float32), gt.shape)
        losses.append(loss_and_grad(empty, gt, lam)[0])
    return float(np.mean(losses))
