"""pycolmap's part: a database with one camera per group of photos, SIFT features, matching,
mapping, the largest reconstruction. pycolmap's own log (glog) is turned down to errors: the
caller prints one line per stage instead, and its errors (no model) become one-line SfmErrors."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from .inputs import SfmError, require_pycolmap

# Extraction runs in batches of this many images, so that the caller can show progress.
EXTRACT_BATCH = 8
# Video frames: each frame is matched with the next OVERLAP ones (and, quadratic, with frames
# 2, 4, 8, ... ahead), which also ties frames across a slow stretch of the capture.
OVERLAP = 10
# Loop closure without a vocabulary tree (COLMAP's needs one downloaded): keyframes, every
# SfmSettings.loop_every-th frame, are matched with each other where sequential matching does not
# pair them; at most LOOP_KEYFRAMES of them (a longer video spaces them further: ≤ 276 pairs).
LOOP_KEYFRAMES = 24


@dataclass
class Reconstruction:
    """The largest reconstruction and what the summary says of it."""

    model: object                       # pycolmap.Reconstruction
    registered: list
    unregistered: list
    points: int
    reprojection_error: float
    models: int                         # how many separate reconstructions the mapper made
    seconds: dict = field(default_factory=dict)
    cpu_seconds: dict = field(default_factory=dict)   # every thread's: the figure a busy machine keeps
    first_octave: int = -1              # SIFT's (extract: 0 where the photos have texture to spare)


def _quiet(pycolmap) -> None:
    pycolmap.logging.minloglevel = 3   # fatal only: what fails is reported as an SfmError
    pycolmap.logging.stderrthreshold = 3


def reconstruct(images: Path, work: Path, groups, settings, kind: str, log,
                progress=None) -> Reconstruction:
    """Features, matches and poses for the photos of ``groups`` (one camera each) in
    ``images``; the database and the mapper's models go into ``work``. ``log``: one line per
    stage; ``progress(stage, done, total)``: progress within a stage."""
    pycolmap = require_pycolmap()
    _quiet(pycolmap)
    pycolmap.set_random_seed(settings.seed)
    db = str(work / "database.db")
    names = sorted(n for g in groups for n in g.names)
    seconds, cpu = {}, {}

    t, c = time.perf_counter(), time.process_time()
    database = pycolmap.Database.open(db)
    try:
        ids = []
        for g in groups:
            cam = pycolmap.Camera(model="SIMPLE_RADIAL", width=g.width, height=g.height,
                                  params=[g.focal, g.width / 2, g.height / 2, 0.0])
            cam.has_prior_focal_length = g.prior
            ids.append(database.write_camera(cam))
    finally:
        database.close()
    for g, cid in zip(groups, ids):
        pycolmap.import_images(db, str(images), pycolmap.CameraMode.AUTO, list(g.names),
                               pycolmap.ImageReaderOptions(existing_camera_id=cid))
    octave = extract(pycolmap, db, images, names, settings, progress)
    seconds["extraction"], cpu["extraction"] = time.perf_counter() - t, time.process_time() - c
    log(f"extracted features of {len(names)} images, SIFT from octave {octave} "
        f"({seconds['extraction']:.0f} s)")

    t, c = time.perf_counter(), time.process_time()
    matcher = settings.matcher_for(kind)
    loop_note = ""
    if matcher == "sequential":
        pairs = pycolmap.SequentialPairingOptions(overlap=OVERLAP, quadratic_overlap=True)
        pycolmap.match_sequential(db, pairing_options=pairs)
        loops = loop_pairs(names, settings.loop_every)
        if loops:
            before = _verified_pairs(pycolmap, db)
            listing = work / "loop_pairs.txt"
            listing.write_text("".join(f"{a} {b}\n" for a, b in loops))
            pycolmap.match_image_pairs(db, pairing_options=pycolmap.ImportedPairingOptions(
                match_list_path=str(listing)))
            loop_note = (f"; loop closure: {_verified_pairs(pycolmap, db) - before} of "
                         f"{len(loops)} keyframe pairs")
    else:
        pycolmap.match_exhaustive(db)
    seconds["matching"], cpu["matching"] = time.perf_counter() - t, time.process_time() - c
    verified = _verified_pairs(pycolmap, db)
    log(f"matched {len(names)} images {matcher}ly: {verified} image pairs share geometry"
        f"{loop_note} ({seconds['matching']:.0f} s)")

    t, c = time.perf_counter(), time.process_time()
    out = work / "models"
    out.mkdir(parents=True, exist_ok=True)
    if settings.mapper == "global":
        options = pycolmap.GlobalPipelineOptions(random_seed=settings.seed)
        models = pycolmap.global_mapping(db, str(images), str(out), options)
    else:
        options = pycolmap.IncrementalPipelineOptions(random_seed=settings.seed)
        done = [0]

        def next_image():
            done[0] += 1
            if progress:
                progress("mapping", min(done[0] + 1, len(names)), len(names))

        models = pycolmap.incremental_mapping(db, str(images), str(out), options,
                                              next_image_callback=next_image)
    seconds["mapping"], cpu["mapping"] = time.perf_counter() - t, time.process_time() - c
    if not models:
        raise SfmError(_too_few(0, len(names)))
    model = max(models.values(), key=lambda m: m.num_reg_images())
    registered = sorted(model.image(i).name for i in model.reg_image_ids())
    return Reconstruction(model, registered, sorted(set(names) - set(registered)),
                          model.num_points3D(), float(model.compute_mean_reprojection_error()),
                          len(models), seconds, cpu, octave)


def _verified_pairs(pycolmap, db: str) -> int:
    database = pycolmap.Database.open(db)
    try:
        return database.num_verified_image_pairs()
    finally:
        database.close()


def loop_pairs(names: list, every: int, most: int = LOOP_KEYFRAMES) -> list[tuple]:
    """The keyframe pairs loop closure matches: frames ``every`` apart (further where that gives
    more than ``most``), each with every other one that sequential matching leaves unpaired
    (further apart than OVERLAP and than a power of two below 2^OVERLAP: quadratic overlap's
    pairs). ``every`` 0: none. ``names`` in the video's order."""
    if every <= 0 or len(names) < 2:
        return []
    step = max(every, -(-len(names) // most))

    def sequential(d: int) -> bool:
        return d <= OVERLAP or (d & (d - 1) == 0 and d < 1 << OVERLAP)

    return [(names[a], names[b]) for a, b in combinations(range(0, len(names), step), 2)
            if not sequential(b - a)]


def first_octave(feature_counts, max_features: int) -> int:
    """SIFT's first octave for a capture, from the features its first photos give at octave 0:
    0 (the image as it is) when their median reaches half the cap, else -1 (COLMAP's default: the
    image upsampled 2x, about 4x the features and the extraction time). Where the photos already
    give half the cap, upsampling only costs time (the cap drops what it adds); a textureless
    capture needs it (fox and mouse, docs/sfm.md)."""
    counts = sorted(int(n) for n in feature_counts)
    if not counts:
        return -1
    return 0 if counts[len(counts) // 2] >= max_features // 2 else -1


def extract(pycolmap, db: str, images: Path, names: list, settings, progress) -> int:
    """SIFT features of every image into ``db``, in batches (progress); the first batch, at
    octave 0, decides the first octave (:func:`first_octave`) and is extracted again at -1 when
    that is the choice. Returns the octave used."""
    def options(octave):
        o = pycolmap.FeatureExtractionOptions(max_image_size=settings.sfm_side)
        o.sift.max_num_features = settings.max_features
        o.sift.first_octave = octave
        return o

    probe = names[:EXTRACT_BATCH]
    pycolmap.extract_features(db, str(images), probe, extraction_options=options(0))
    database = pycolmap.Database.open(db)
    try:
        counts = [database.num_keypoints_for_image(database.read_image_with_name(n).image_id)
                  for n in probe]
        octave = first_octave(counts, settings.max_features)
        if octave != 0:       # COLMAP skips images with features: the probe's go first
            database.clear_keypoints()
            database.clear_descriptors()
    finally:
        database.close()
    done = 0 if octave != 0 else len(probe)
    if done and progress:
        progress("extraction", done, len(names))
    for i in range(done, len(names), EXTRACT_BATCH):
        pycolmap.extract_features(db, str(images), names[i:i + EXTRACT_BATCH],
                                  extraction_options=options(octave))
        if progress:
            progress("extraction", min(i + EXTRACT_BATCH, len(names)), len(names))
    return octave


def _too_few(registered: int, total: int) -> str:
    return (f"SfM placed only {registered} of {total} images: the photos need more overlap (every "
            f"part of the scene in 3 or more photos taken a step apart, not from one spot), or "
            f"more photos")


def check_registered(rec: Reconstruction, total: int, least_fraction: float) -> None:
    """Refuse a result that placed fewer than 3 images or less than ``least_fraction`` of them."""
    n = len(rec.registered)
    if n < 3 or n < least_fraction * total:
        raise SfmError(_too_few(n, total))
