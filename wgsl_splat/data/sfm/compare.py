"""Recovered cameras against published ones: the similarity (scale, rotation, translation) that
best maps one set of camera centres onto the other (Umeyama 1991), and the rotation and centre
errors that remain (benchmarks/sfm_accuracy.py, the tests)."""

from __future__ import annotations

import numpy as np


def umeyama(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``(s, R, t)`` minimising ``Σ |s·R·src_i + t − dst_i|²`` (``src``, ``dst``: (N, 3))."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    a, b = src - mu_s, dst - mu_d
    cov = b.T @ a / len(src)
    u, d, vt = np.linalg.svd(cov)
    e = np.eye(3)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        e[2, 2] = -1
    r = u @ e @ vt
    s = float(np.trace(np.diag(d) @ e) / (a ** 2).sum(1).mean())
    return s, r, mu_d - s * r @ mu_s


def centre_and_rotation(world_to_camera: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = world_to_camera[:3, :3]
    return -r.T @ world_to_camera[:3, 3], r


def scene_extent(centres: np.ndarray) -> float:
    """1.1 × the largest distance of a camera centre from their mean (the trainer's extent,
    docs/design.md §2)."""
    return 1.1 * float(np.linalg.norm(centres - centres.mean(0), axis=1).max())


def _with_axes(centres: np.ndarray, rotations) -> np.ndarray:
    step = 0.1 * scene_extent(centres)
    axes = [centres + step * np.array([r[k] for r in rotations]) for k in (1, 2)]
    return np.concatenate([centres] + axes)


def pose_errors(ours: dict, published: dict) -> dict:
    """Errors of the cameras both dicts hold (name -> world-to-camera 4×4) after aligning
    ``ours`` onto ``published``: per name, the rotation error (degrees) and the centre error
    (fraction of the published cameras' extent); and the alignment (``similarity``: ``(s, R, t)``
    mapping a point of ``ours``' world to ``published``'s as ``s·R·x + t``), the aligned centres
    and the cameras left out of the refit (``outliers``)."""
    names = sorted(ours.keys() & published.keys())
    if len(names) < 3:
        raise ValueError(f"only {len(names)} cameras in common: an alignment needs 3")
    c_o, r_o = zip(*(centre_and_rotation(ours[n]) for n in names))
    c_p, r_p = zip(*(centre_and_rotation(published[n]) for n in names))
    c_o, c_p = np.array(c_o), np.array(c_p)
    # The centres alone leave the rotation about their line free when the cameras stand nearly
    # in a row (a dozen neighbouring views): points a step along each camera's view and down
    # axes pin it (the step a tenth of each set's own extent, so that it scales with the set).
    s, rot, t = umeyama(_with_axes(c_o, r_o), _with_axes(c_p, r_p))
    aligned = (s * (rot @ c_o.T)).T + t
    extent = scene_extent(c_p)
    # Least squares lets a few cameras placed differently by one of the two models pull every
    # other one off: refit once on the cameras within 3 × the median distance (the errors of
    # all are then reported, the outliers' included).
    d = np.linalg.norm(aligned - c_p, axis=1)
    inliers = d <= max(3 * np.median(d), 1e-3 * extent)
    if 3 <= inliers.sum() < len(d):
        keep = np.flatnonzero(inliers)
        s, rot, t = umeyama(_with_axes(c_o[keep], [r_o[i] for i in keep]),
                            _with_axes(c_p[keep], [r_p[i] for i in keep]))
        aligned = (s * (rot @ c_o.T)).T + t
    rot_err, centre_err = {}, {}
    for i, n in enumerate(names):
        rel = r_p[i] @ (r_o[i] @ rot.T).T
        rot_err[n] = float(np.degrees(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1, 1))))
        centre_err[n] = float(np.linalg.norm(aligned[i] - c_p[i]) / extent)
    return {"names": names, "rotation_deg": rot_err, "centre": centre_err, "scale": s,
            "similarity": (s, rot, t),
            "aligned": aligned, "published": c_p, "extent": extent,
            "outliers": [n for n, ok in zip(names, inliers) if not ok]}


def error_summary(errors: dict) -> dict:
    """Median and worst of :func:`pose_errors`' rotation (degrees) and centre (% of the extent)
    errors: the figures docs/sfm.md reports."""
    rot = np.array(list(errors["rotation_deg"].values()))
    cen = 100 * np.array(list(errors["centre"].values()))
    return {"rotation_deg_median": float(np.median(rot)), "rotation_deg_worst": float(rot.max()),
            "centre_pct_median": float(np.median(cen)), "centre_pct_worst": float(cen.max())}
