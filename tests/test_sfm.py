"""SfM from photos or a video (wgsl_splat.data.sfm, the ``sfm`` command, ``train PHOTOS``): a
dozen fox photos at 320 px register and load through the COLMAP loader, their poses agree with
the published ones after a similarity alignment, the result is reused while its inputs are the
same, a short generated clip goes the video path, and each bad input is one line with nothing
half-written."""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from wgsl_splat.app.cli import main
from wgsl_splat.data.datasets import load_dataset
from wgsl_splat.data.sfm import SfmError, SfmSettings, cached_scene_dir, make_scene
from wgsl_splat.data.sfm.compare import (
    centre_and_rotation,
    error_summary,
    pose_errors,
    umeyama,
)

pytest.importorskip("pycolmap", reason="the sfm extra: pip install 'wgsl_splat[sfm]'")

# Twelve neighbouring photos of the fox (one sweep of the capture)
FOX_NAMES = [f"{i:04d}.jpg" for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 16)]
SIDE = 320
# A short run: as many frames as photos, settings small enough for seconds
SMALL = SfmSettings(max_side=SIDE, sfm_side=SIDE, frames=len(FOX_NAMES))


def small_photos(fox_dir, folder, names=FOX_NAMES, side=SIDE):
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        with Image.open(fox_dir / "images" / n) as im:
            im.thumbnail((side, side))
            im.save(folder / n, quality=92)
    return folder


def no_temp_left(parent) -> bool:
    return not [p for p in os.listdir(parent) if p.endswith((".tmp", ".old"))]


@pytest.fixture(scope="module")
def photos(fox_dir, tmp_path_factory):
    """A dozen fox photos, a text file and an unreadable "photo" mixed in; their SfM result
    computed where ``train`` caches it."""
    folder = small_photos(fox_dir, tmp_path_factory.mktemp("sfm") / "photos")
    (folder / "notes.txt").write_text("not a photo")
    (folder / "broken.jpg").write_bytes(b"not a jpeg")
    lines = []
    result = make_scene(folder, cached_scene_dir(folder), SMALL, log=lines.append)
    return folder, result, lines


def test_a_dozen_photos_register_and_load_through_the_colmap_loader(photos):
    folder, result, lines = photos
    s = result.record["summary"]
    assert not result.reused
    assert s["total"] == len(FOX_NAMES) and s["registered"] >= len(FOX_NAMES) - 1, s
    assert s["skipped"] == ["notes.txt"] and s["unreadable"][0].startswith("broken.jpg")
    assert any("notes.txt" in line for line in lines)
    assert s["points"] > 100 and s["reprojection_error"] < 1.5
    assert set(s["seconds"]) == {"images", "extraction", "matching", "mapping"}
    ds = load_dataset(result.folder)
    assert len(ds.cameras) == s["registered"] and ds.points is not None
    assert {(c.width, c.height) for c in ds.cameras} == {(180, 320)}
    assert sorted(os.listdir(result.folder)) == ["images", "sfm.json", "sparse"]
    assert no_temp_left(result.folder.parent)


def test_the_recovered_poses_align_with_the_published_ones(photos, fox_dir):
    """After a similarity alignment (Umeyama), every recovered camera is within 2° and 2 % of
    the extent of its published pose (at 320 px; the full-size figures are in docs/sfm.md)."""
    ours = {c.name: c.world_to_camera for c in load_dataset(photos[1].folder).cameras}
    published = {c.name: c.world_to_camera for c in load_dataset(fox_dir).cameras}
    e = pose_errors(ours, published)
    assert len(e["names"]) >= len(FOX_NAMES) - 1
    assert max(e["rotation_deg"].values()) < 2.0, e["rotation_deg"]
    assert max(e["centre"].values()) < 0.02, e["centre"]
    summary = error_summary(e)      # the figures the benchmarks report, in degrees and %
    assert summary["rotation_deg_worst"] == max(e["rotation_deg"].values())
    assert summary["centre_pct_worst"] == pytest.approx(100 * max(e["centre"].values()))
    s, r, t = e["similarity"]   # what sfm_training moves the SfM points into the published frame by
    centres = np.array([centre_and_rotation(ours[n])[0] for n in e["names"]])
    np.testing.assert_allclose(s * centres @ r.T + t, e["aligned"], atol=1e-9)


def test_umeyama_recovers_a_similarity():
    rng = np.random.default_rng(1)
    src = rng.normal(size=(20, 3))
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    dst = 2.5 * src @ q.T + [1.0, -2.0, 0.5]
    s, r, t = umeyama(src, dst)
    assert s == pytest.approx(2.5) and np.allclose(r, q) and np.allclose(t, [1.0, -2.0, 0.5])


def test_the_same_inputs_reuse_the_result_and_train_starts_from_it(photos, monkeypatch):
    """A second run on the same photos and settings does no SfM (reconstruct would fail), and
    ``train PHOTOS`` trains on the cached COLMAP folder."""
    from wgsl_splat.data.sfm import scene

    folder, result, _ = photos
    monkeypatch.setattr(scene, "reconstruct", lambda *a, **k: pytest.fail("SfM ran again"))
    again = make_scene(folder, result.folder, SMALL, log=lambda line: None)
    assert again.reused and again.record["key"] == result.record["key"]
    out = folder.parent / "run"
    args = ["train", str(folder), "--out", str(out), "--preset", "smoke", "--iters", "2",
            "-r", "2", "--device", "cpu", "--max-side", str(SIDE), "--sfm-side", str(SIDE)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "reusing the SfM result" in res.output and "SfM: " in res.output
    assert (out / "point_cloud" / "iteration_2" / "point_cloud.ply").is_file()
    # a resumed run keeps the run's SfM settings without being given them again, so it finds
    # the same poses (reconstruct would fail); given a different one, it is refused
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(out), "--resume", "latest",
                                    "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "reusing the SfM result" in res.output
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(out), "--resume", "latest",
                                    "--device", "cpu", "--max-side", "640"])
    assert res.exit_code != 0 and "--max-side 640 disagrees with the run being resumed (320)" \
        in res.output, res.output


def test_a_result_of_other_inputs_is_refused_or_recomputed(photos, tmp_path):
    """``sfm --out`` holding the result of other photos: refused with one line (``train``'s
    cache recomputes it instead, replace_other)."""
    folder, result, _ = photos
    other = tmp_path / "other"
    shutil.copytree(folder, other, ignore=shutil.ignore_patterns(".*"))
    (other / FOX_NAMES[0]).unlink()
    out = tmp_path / "scene"
    shutil.copytree(result.folder, out)
    before = sorted(os.listdir(out))
    res = CliRunner().invoke(main, ["sfm", str(other), "--out", str(out)])
    assert res.exit_code == 1
    assert "other inputs" in res.output and f"1 removed: {FOX_NAMES[0]}" in res.output
    assert "--overwrite" in res.output and "Traceback" not in res.output
    assert sorted(os.listdir(out)) == before and (out / "sparse" / "0").is_dir()   # untouched


def fox_clip(fox_dir, path, names=FOX_NAMES, blurred_window=None):
    """A clip of the photos, each as one sharp frame between two blurred ones (so the sampler
    must pick the middle one); ``blurred_window``: that photo's window has only blurred
    frames."""
    import imageio_ffmpeg
    from PIL import ImageFilter

    frames = []
    for i, n in enumerate(names):
        with Image.open(fox_dir / "images" / n) as im:
            im = im.convert("RGB").resize((180, 320), Image.Resampling.LANCZOS)
        soft = im.filter(ImageFilter.GaussianBlur(4))
        sharp = soft if i == blurred_window else im
        frames += [soft, sharp, soft]
    writer = imageio_ffmpeg.write_frames(str(path), (180, 320), fps=10, quality=9,
                                         macro_block_size=4)
    writer.send(None)
    for f in frames:
        writer.send(np.ascontiguousarray(np.asarray(f)))
    writer.close()
    return path


def test_a_video_samples_sharp_frames_and_registers(fox_dir, tmp_path):
    clip = fox_clip(fox_dir, tmp_path / "clip.mp4", blurred_window=5)
    lines = []
    result = make_scene(clip, tmp_path / "scene", SMALL, log=lines.append)
    s = result.record["summary"]
    assert s["blurred"] == ["frame_00016.jpg"], s     # the window whose frames are all blurred
    kept = sorted(os.listdir(result.folder / "images"))
    assert len(kept) == len(FOX_NAMES) - 1 and all(int(n[6:11]) % 3 == 1 for n in kept)
    assert s["registered"] >= len(kept) - 1 and result.record["settings"]["matcher"] == "sequential"
    assert len(load_dataset(result.folder).cameras) == s["registered"]


def test_loop_pairs_are_the_keyframe_pairs_sequential_matching_leaves_out():
    from wgsl_splat.data.sfm.reconstruct import OVERLAP, loop_pairs
    names = [f"frame_{i:05d}.jpg" for i in range(120)]
    pairs = loop_pairs(names, 10)
    apart = sorted({int(b[6:11]) - int(a[6:11]) for a, b in pairs})
    # keyframes 0, 10, ..., 110: every pair further apart than OVERLAP, none a power of two
    assert apart == [20, 30, 40, 50, 60, 70, 80, 90, 100, 110] and OVERLAP == 10
    assert len(pairs) == 66 - 11 and ("frame_00000.jpg", "frame_00110.jpg") in pairs
    assert loop_pairs(names, 0) == [] and loop_pairs(names[:11], 10) == []
    # a long video spaces its keyframes further: never more than LOOP_KEYFRAMES of them
    many = [f"frame_{i:05d}.jpg" for i in range(1000)]
    keys = {n for pair in loop_pairs(many, 10) for n in pair}
    assert 20 <= len(keys) <= 24


def test_a_video_that_comes_back_is_tied_up_by_loop_closure(fox_dir, tmp_path, monkeypatch):
    """Loop closure through pycolmap: with sequential matching cut to 2 frames ahead, the
    keyframes 3 apart are matched by the pairs file, and they share geometry."""
    from wgsl_splat.data.sfm import reconstruct
    monkeypatch.setattr(reconstruct, "OVERLAP", 2)
    # out along every other photo of the sweep, back along the ones between
    clip = fox_clip(fox_dir, tmp_path / "clip.mp4", names=FOX_NAMES[::2] + FOX_NAMES[::-2])
    lines = []
    settings = SfmSettings(max_side=SIDE, sfm_side=SIDE, frames=12, loop_every=3)
    result = make_scene(clip, tmp_path / "scene", settings, log=lines.append)
    matched = next(line for line in lines if line.startswith("matched"))
    # keyframes 0, 3, 6, 9: pairs 3, 6 and 9 apart (1 and 2 apart are sequential's)
    assert "of 6 keyframe pairs" in matched, matched
    assert int(matched.split("loop closure: ")[1].split()[0]) >= 3, matched
    assert not (tmp_path / "scene" / "loop_pairs.txt").exists()    # scratch stays out
    assert result.record["summary"]["registered"] >= 11
    assert result.record["settings"]["loop_every"] == 3


def test_a_downscaled_video_says_nothing_of_its_frame_size(fox_dir, tmp_path, capsys, caplog):
    """Frames read smaller than the video (--max-side) are what was asked: no warning from
    imageio-ffmpeg about the size reaches the user."""
    from wgsl_splat.data.sfm.video import write_frames
    clip = fox_clip(fox_dir, tmp_path / "clip.mp4", names=FOX_NAMES[:3])
    names, _blurred, _seen, size = write_frames(clip, tmp_path / "images", 3, 160)
    assert max(size) == 160 and len(names) == 3
    out = capsys.readouterr()
    text = out.out + out.err + caplog.text
    assert "frame size" not in text, text


def run_cli(*args):
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert "Traceback" not in res.output and lines[-1].startswith("Error: "), res.output
    assert sum("Error" in line for line in lines) == 1, res.output
    return lines[-1]


def test_bad_inputs_are_one_line_and_write_nothing(fox_dir, tmp_path, monkeypatch):
    out = tmp_path / "out"
    two = small_photos(fox_dir, tmp_path / "two", FOX_NAMES[:2])
    assert "has 2 photos: SfM needs at least 3" in run_cli("sfm", str(two), "--out", str(out))

    noise = tmp_path / "noise"
    noise.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):   # nothing in common between them
        Image.fromarray(rng.integers(0, 255, (96, 128, 3), np.uint8)).save(noise / f"{i}.png")
    msg = run_cli("sfm", str(noise), "--out", str(out))
    assert "placed only 0 of 4 images" in msg and "more overlap" in msg

    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(2000))
    assert "cannot read the video" in run_cli("sfm", str(corrupt), "--out", str(out))

    clip = fox_clip(fox_dir, tmp_path / "clip.mp4", FOX_NAMES[:4])
    msg = run_cli("sfm", str(clip), "--out", str(out), "--frames", "100")
    assert "has 12 frames, fewer than --frames 100" in msg

    monkeypatch.setitem(sys.modules, "pycolmap", None)   # import pycolmap raises ImportError
    photos = small_photos(fox_dir, tmp_path / "three", FOX_NAMES[:3])
    msg = run_cli("sfm", str(photos), "--out", str(out))
    assert "needs pycolmap: pip install 'wgsl_splat[sfm]'" in msg
    with pytest.raises(SfmError, match="pip install"):
        make_scene(photos, out)

    assert not out.exists() and no_temp_left(tmp_path)


def test_train_names_what_a_photo_folder_needs_when_it_is_not_a_scene(tmp_path):
    """The scene loader (render --data, eval) points a folder of photos at sfm."""
    small = tmp_path / "p"
    small.mkdir()
    Image.new("RGB", (8, 8)).save(small / "a.png")
    from wgsl_splat.data.datasets import DatasetError

    with pytest.raises(DatasetError, match="folder of photos without camera poses.*sfm"):
        load_dataset(small)


def test_first_octave_upsamples_only_photos_short_of_features():
    from wgsl_splat.data.sfm.reconstruct import first_octave
    assert first_octave([1500, 1400, 1600], 2048) == 0       # fox at 1 024 px: texture to spare
    assert first_octave([350, 900, 2048], 2048) == -1        # mouse: upsampled
    assert first_octave([], 2048) == -1


@pytest.mark.parametrize("cap,octave", [(64, 0), (100_000, -1)])
def test_extraction_keeps_one_octave_for_every_image(fox_dir, tmp_path, cap, octave):
    """The probe batch decides; where it chooses -1, its photos are extracted again at -1 (COLMAP
    would skip photos that already have features), so every photo has one octave's features."""
    import pycolmap

    from wgsl_splat.data.sfm.reconstruct import EXTRACT_BATCH, extract
    names = FOX_NAMES[:EXTRACT_BATCH + 2]
    folder = small_photos(fox_dir, tmp_path / "photos", names)
    db = str(tmp_path / "database.db")
    pycolmap.Database.open(db).close()
    pycolmap.import_images(db, str(folder), pycolmap.CameraMode.SINGLE, names)
    settings = SfmSettings(sfm_side=SIDE, max_features=cap)
    assert extract(pycolmap, db, folder, names, settings, None) == octave
    database = pycolmap.Database.open(db)
    try:
        counts = {n: database.num_keypoints_for_image(database.read_image_with_name(n).image_id)
                  for n in names}
    finally:
        database.close()
    # the probe's photos have as many features as the rest (upsampled too where that is chosen:
    # 4x as many)
    probe, rest = names[:EXTRACT_BATCH], names[EXTRACT_BATCH:]
    assert min(counts[n] for n in probe) > 0.5 * max(counts[n] for n in rest), counts
