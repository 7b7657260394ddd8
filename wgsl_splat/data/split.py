"""The train/test split of a scene's views (``--eval``): every 8th view held out, or the format's
own split where it has one (Blender's ``transforms_test.json``), as 3DGS."""

from __future__ import annotations


def split_views(cameras, kind: str, eval_split: bool, split_hint: dict | None,
                notes: list) -> tuple[list[int], list[int]]:
    """``(train, test)`` view indices of ``cameras`` (sorted by name). Without ``eval_split``
    every view trains; one image is both; ``split_hint`` (image path -> "train"/"test") is the
    format's own split; too few views to hold one out train on all (a note says so)."""
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
