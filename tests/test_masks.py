"""Masks (docs/design.md §2, docs/captures.md): masked pixels leave the loss on both paths, their
gradient is zero, the metrics skip them; the loaders find masks/ beside images/ and the alpha of
RGBA photos, and refuse masks of the wrong size or missing for some images."""

import json

import numpy as np
import pytest

from wgsl_splat.contract.losses import MASKED, masked_target
from wgsl_splat.gpu.loss import VARIANTS, GpuLoss
from wgsl_splat.reference.loss import l1, loss_and_grad, ssim
from wgsl_splat.tools.gradcheck import rel_error


def fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    return np.random.default_rng(seed), seed


def masked_pair(rng, shape):
    h, w, _ = shape
    gt = rng.uniform(0, 1, shape)
    img = np.clip(gt + rng.normal(0, 0.15, shape), 0, 1)
    diff = img - gt   # |img - gt| >= 1e-3: finite differences never straddle |·|'s kink
    img = np.where(np.abs(diff) < 1e-3, gt + np.where(diff < 0, -1e-3, 1e-3), img)
    mask = np.ones((h, w), bool)
    mask[h // 4: h // 2, w // 3:] = False            # a block, as a masked object
    mask[rng.uniform(size=(h, w)) < 0.1] = False     # and scattered pixels
    return img, gt, mask


def test_masked_loss_is_the_loss_of_the_zeroed_images_and_its_gradient_fd():
    rng, seed = fresh_rng()
    img, gt, mask = masked_pair(rng, (17, 21, 3))
    target = masked_target(gt, mask)
    assert np.all(target[~mask] == MASKED) and np.array_equal(target[mask], gt[mask])
    loss, grad, _ = loss_and_grad(img, target, lam=0.2)
    m = mask[..., None].astype(float)
    zi, zg = img * m, gt * m
    assert loss == pytest.approx(0.8 * l1(zi, zg) + 0.2 * (1 - ssim(zi, zg)), abs=1e-14)
    assert np.all(grad[~mask] == 0), f"seed={seed}"

    def f(x):
        return 0.8 * l1(x * m, zg) + 0.2 * (1 - ssim(x * m, zg))

    fd = np.zeros_like(img)
    h = 1e-5
    for idx in np.ndindex(img.shape):
        x = img.copy()
        x[idx] += h
        fp = f(x)
        x[idx] -= 2 * h
        fd[idx] = (fp - f(x)) / (2 * h)
    assert np.linalg.norm(fd - grad) / np.linalg.norm(grad) < 1e-6, f"seed={seed}"
    # Nothing masked: the unmasked loss exactly.
    l0, g0, _ = loss_and_grad(img, gt)
    l1_, g1, _ = loss_and_grad(img, masked_target(gt, np.ones(mask.shape, bool)))
    assert l0 == l1_ and np.array_equal(g0, g1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_masked_loss_matches_reference(gpu_ctx, variant):
    rng, seed = fresh_rng()
    img, gt, mask = masked_pair(rng, (37, 45, 3))
    target = masked_target(gt, mask).astype(np.float32)
    gpu = GpuLoss(gpu_ctx, variant=variant)
    loss, grad, parts = gpu.compute(img.astype(np.float32), target)
    ref_loss, ref_grad, ref_parts = loss_and_grad(img, target.astype(np.float64))
    assert abs(loss - ref_loss) <= 1e-5 * ref_loss, f"seed={seed}"
    assert abs(parts["ssim"] - ref_parts["ssim"]) <= 1e-5, f"seed={seed}"
    assert abs(parts["l1"] - ref_parts["l1"]) <= 1e-6, f"seed={seed}"
    assert np.all(grad[~mask] == 0), f"seed={seed}"
    assert rel_error(grad, ref_grad)[0] <= 1e-4, f"seed={seed}"


def test_gpu_step_gradients_with_a_mask_match_reference_and_ignore_masked_pixels(gpu_ctx):
    """The whole step: GPU parameter gradients vs the float64 reference on a masked target; what
    the target holds under the mask changes nothing (no gradient flows from there, so the
    densification statistic, a norm of this gradient, ignores masked pixels too)."""
    from wgsl_splat.contract.optim import OptimConfig
    from wgsl_splat.gpu.step import GpuTrainStep
    from wgsl_splat.tools.gradcheck import compare, make_problem

    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    model, cam, target = make_problem(seed, 120, 45, 33, background=(0.1, 0.2, 0.3))
    keep = np.ones(target.shape[:2], bool)
    keep[8:25, 10:30] = False
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), (0.1, 0.2, 0.3))
    masked = masked_target(target, keep)
    bad = [f"{e.group}: {e.rel_error:.2e}" for e in compare(step, model, cam, masked) if not e.ok]
    assert not bad, f"seed {seed}: {bad}"
    a = step.gradients(cam, masked)
    other = target.copy()
    other[~keep] = 1.0 - other[~keep]
    b = step.gradients(cam, masked_target(other, keep))
    # Float atomics sum in any order, so two runs agree to rounding, not to the bit; a leak from
    # under the mask (inverted there) would move the gradients by O(1) of their size.
    assert a.loss == pytest.approx(b.loss, rel=1e-6), f"seed {seed}"
    for name in ("means", "log_scales", "quats", "opacity_logits", "sh"):
        ga, gb = getattr(a.params, name), getattr(b.params, name)
        err = np.max(np.abs(ga - gb)) / max(np.max(np.abs(ga)), 1e-30)
        assert err < 1e-4, f"seed {seed}: {name} moved by {err:.2e} of its size"


# --------------------------------------------------------------------------------- the loaders

def _colmap_with_masks(root, rng, n=3, size=(40, 30), names=None):
    from test_datasets import make_colmap, save_png

    make_colmap(root, rng, n_images=n, size=size)
    w, h = size
    masks = []
    for i in range(n):
        m = np.full((h, w), 255, np.uint8)
        m[5:12, 10 + i:20 + i] = 0
        masks.append(m > 0)
        name = (names or ["img_{:02d}.png"])[i % len(names or [1])].format(i)
        save_png(root / "masks" / name, m)
    return masks


@pytest.mark.parametrize("names", [["img_{:02d}.png"], ["img_{:02d}.png.png", "img_{:02d}.png"]])
def test_colmap_masks_folder_all_naming_conventions(tmp_path, names):
    from wgsl_splat.data.datasets import load_dataset

    rng, _ = fresh_rng()
    masks = _colmap_with_masks(tmp_path, rng, names=names)
    d = load_dataset(tmp_path)
    assert any(n.startswith("masks from masks/ for all 3 images") for n in d.notes)
    for i in range(3):
        assert np.array_equal(d.load_mask(i), masks[i])
        t = d.load_target(i)
        assert np.all(t[~masks[i]] == MASKED) and np.array_equal(t[masks[i]], d.load_image(i)[masks[i]])
    d.preload()
    assert np.array_equal(d.load_mask(1), masks[1])
    # Downscaled by 2: a pixel counts when at least half of what it covers does.
    d2 = load_dataset(tmp_path, resolution=2)
    expect = masks[0].reshape(15, 2, 20, 2).mean(axis=(1, 3)) >= 0.5
    assert np.array_equal(d2.load_mask(0), expect)


def test_mask_extension_replaced_by_png(tmp_path):
    from test_datasets import make_colmap, save_png

    from wgsl_splat.data.datasets import load_dataset

    rng, _ = fresh_rng()
    make_colmap(tmp_path, rng, n_images=2)
    for name in ("img_00.png", "img_01.png"):   # images as .jpg, masks as .png
        img = np.asarray(__import__("PIL.Image").Image.open(tmp_path / "images" / name))
        (tmp_path / "images" / name).unlink()
        __import__("PIL.Image").Image.fromarray(img).save(tmp_path / "images" / (name[:-4] + ".jpg"))
        save_png(tmp_path / "masks" / name, np.zeros((30, 40), np.uint8) + 255)
    for f in (tmp_path / "sparse" / "0").iterdir():
        f.write_bytes(f.read_bytes().replace(b".png", b".jpg"))
    d = load_dataset(tmp_path)
    assert [s.mask.endswith(".png") for s in d.sources] == [True, True]
    assert d.load_mask(0) is None   # all white: every pixel counts


def test_bad_masks_are_refused_in_one_line(tmp_path):
    from test_datasets import save_png

    from wgsl_splat.data.datasets import DatasetError, load_dataset

    rng, _ = fresh_rng()
    _colmap_with_masks(tmp_path / "a", rng)
    (tmp_path / "a" / "masks" / "img_01.png").unlink()
    with pytest.raises(DatasetError, match=r"^masks/ has masks for 2 of 3 images; missing for "
                                           r"img_01.png \(every image needs one") as e:
        load_dataset(tmp_path / "a")
    assert "\n" not in str(e.value)
    _colmap_with_masks(tmp_path / "b", rng)
    save_png(tmp_path / "b" / "masks" / "img_02.png", np.zeros((15, 20), np.uint8))
    with pytest.raises(DatasetError, match=r"mask .*img_02.png is 20x15 but its image "
                                           r".*img_02.png is 40x30$"):
        load_dataset(tmp_path / "b")


def test_colmap_rgba_alpha_is_a_mask_and_combines_with_the_mask_file(tmp_path):
    from test_datasets import make_colmap, save_png

    from wgsl_splat.data.datasets import load_dataset

    rng, _ = fresh_rng()
    make_colmap(tmp_path, rng, n_images=2)
    rgba = rng.integers(0, 256, (30, 40, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    rgba[:, :8, 3] = 0            # transparent: masked
    save_png(tmp_path / "images" / "img_00.png", rgba)
    d = load_dataset(tmp_path, background=(1, 1, 1))
    keep = np.ones((30, 40), bool)
    keep[:, :8] = False
    assert np.array_equal(d.load_mask(0), keep) and d.load_mask(1) is None
    # the colour is the photo's, not composited on the background
    np.testing.assert_array_equal(d.load_image(0), rgba[..., :3] / np.float32(255))
    m = np.full((30, 40), 255, np.uint8)
    m[20:, :] = 0
    for name in ("img_00.png", "img_01.png"):
        save_png(tmp_path / "masks" / name, m)
    d = load_dataset(tmp_path)
    assert np.array_equal(d.load_mask(0), keep & (m > 0))
    assert np.array_equal(d.load_mask(1), m > 0)


def test_transforms_mask_path_and_blender_alpha_still_composited(tmp_path):
    import json

    from test_datasets import gl_pose, make_blender, save_png

    from wgsl_splat.data.datasets import DatasetError, load_dataset

    frames = []
    for i in range(2):
        save_png(tmp_path / "images" / f"f{i}.png", np.full((16, 24, 3), 100, np.uint8))
        m = np.full((16, 24), 255, np.uint8)
        m[:4] = 0
        save_png(tmp_path / "m" / f"f{i}.png", m)
        frames.append({"file_path": f"images/f{i}.png", "mask_path": f"m/f{i}.png",
                       "transform_matrix": gl_pose([3 + i, 1, 1])})
    meta = {"fl_x": 20.0, "w": 24, "h": 16, "frames": frames}
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    d = load_dataset(tmp_path)
    assert d.load_mask(1)[:4].sum() == 0 and d.load_mask(1)[4:].all()
    del frames[1]["mask_path"]
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="mask_path has masks for 1 of 2 images; missing for f1.png"):
        load_dataset(tmp_path)
    # A folder masks/ beside transforms.json, images under images/ (nerfstudio's layout).
    del frames[0]["mask_path"]
    (tmp_path / "transforms.json").write_text(json.dumps(meta))
    (tmp_path / "m").rename(tmp_path / "masks")
    assert load_dataset(tmp_path).load_mask(0)[:4].sum() == 0
    # NeRF-synthetic keeps compositing alpha onto the background, and finds no masks.
    make_blender(tmp_path / "lego")
    b = load_dataset(tmp_path / "lego", background=(1, 1, 1))
    assert not b.alpha_mask and all(b.load_mask(i) is None for i in range(len(b)))


def test_masked_metrics_skip_masked_pixels():
    from wgsl_splat.reference.loss import psnr
    from wgsl_splat.training.evaluation import image_metrics

    rng, seed = fresh_rng()
    gt = rng.uniform(0, 1, (20, 30, 3))
    render = np.clip(gt + rng.normal(0, 0.05, gt.shape), 0, 1)
    keep = np.ones((20, 30), bool)
    keep[:, 20:] = False
    render[~keep] = 1 - gt[~keep]                     # garbage where masked: must not count
    m = image_metrics(render, gt, keep)
    def q(a):   # the 8-bit quantisation
        return np.floor(a * 255 + 0.5) / 255

    assert m["psnr"] == pytest.approx(psnr(q(render)[keep], q(gt)[keep]), abs=1e-12)
    assert m["psnr"] > image_metrics(render, gt)["psnr"] + 3, f"seed={seed}"
    assert m["l1"] == pytest.approx(np.abs(q(render) - q(gt))[keep].mean(), abs=1e-12)
    assert image_metrics(gt, gt, keep)["ssim"] == pytest.approx(1.0, abs=1e-12)


def test_a_masked_run_scores_unmasked_pixels_and_says_so(tmp_path):
    from click.testing import CliRunner

    from wgsl_splat.app.cli import main

    rng, _ = fresh_rng()
    _colmap_with_masks(tmp_path / "scene", rng, n=9)
    res = CliRunner().invoke(main, ["train", str(tmp_path / "scene"), "--out", str(tmp_path / "r"),
                                    "--device", "cpu", "--preset", "smoke", "--eval", "--iters",
                                    "3"])
    assert res.exit_code == 0, res.output
    assert "(2 masked views: unmasked pixels only)" in res.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())["iteration_3"]
    assert "2 of 2 views masked" in metrics["protocol"]


# ----------------------------------------------------------------- a mask that leaves no pixel

def _empty_view_scene(root, rng, how, n=9):
    """A COLMAP scene with masks where a random view's mask keeps no pixel at -r 4: all black, a
    1-pixel line (kept at -r 1, under half of every 4x4 block at -r 4), or (``alpha``) an RGBA
    photo with alpha 0 and no mask files. Returns the view's name."""
    from test_datasets import make_colmap, save_png

    k = int(rng.integers(n))
    name = f"img_{k:02d}.png"
    if how == "alpha":
        make_colmap(root, rng, n_images=n)
        rgba = rng.integers(0, 256, (30, 40, 4), dtype=np.uint8)
        rgba[..., 3] = 0
        save_png(root / "images" / name, rgba)
        return name
    _colmap_with_masks(root, rng, n=n)
    m = np.zeros((30, 40), np.uint8)
    if how == "line":
        m[:, int(rng.integers(40))] = 255
    save_png(root / "masks" / name, m)
    return name


@pytest.mark.parametrize("how", ["black", "line", "alpha"])
def test_a_view_whose_mask_keeps_no_pixel_is_left_out_at_load(tmp_path, how):
    from wgsl_splat.data.datasets import load_dataset

    rng, seed = fresh_rng()
    name = _empty_view_scene(tmp_path, rng, how)
    d = load_dataset(tmp_path, resolution=4, eval_split=True)
    k = [c.name for c in d.cameras].index(name)
    split = (list(d.train_indices), list(d.test_indices))
    assert d.test_indices == [0, 8] and k in d.train_indices + d.test_indices
    d.preload()
    assert k not in d.train_indices + d.test_indices, f"seed={seed}"
    assert d.train_indices == [i for i in split[0] if i != k]
    assert d.test_indices == [i for i in split[1] if i != k]
    assert f"{name} left out of training and scoring: its mask leaves no pixel at -r 4" in d.notes
    again = load_dataset(tmp_path, resolution=4, eval_split=True)   # a resumed run: the same split
    again.preload()
    assert (again.train_indices, again.test_indices) == (d.train_indices, d.test_indices)
    if how == "line":   # at full resolution the line keeps its pixels: the view stays
        full = load_dataset(tmp_path, eval_split=True)
        full.preload()
        assert sorted(full.train_indices + full.test_indices) == list(range(9))


def test_no_training_view_left_by_the_masks_is_one_line(tmp_path):
    from test_datasets import save_png

    from wgsl_splat.data.datasets import DatasetError, load_dataset

    rng, _ = fresh_rng()
    _colmap_with_masks(tmp_path, rng, n=2)
    for name in ("img_00.png", "img_01.png"):
        save_png(tmp_path / "masks" / name, np.zeros((30, 40), np.uint8))
    d = load_dataset(tmp_path)
    with pytest.raises(DatasetError, match=r"^the mask of every training view leaves no pixel at "
                                           r"-r 1 \(img_00.png, img_01.png\): nothing to train "
                                           r"on") as e:
        d.preload()
    assert "\n" not in str(e.value)


def test_a_run_with_empty_masks_ends_with_its_outputs_and_never_scores_them(tmp_path):
    """An all-black mask on a training view and on a held-out view: the run trains, writes its
    final PLY, checkpoint and metrics, and scores neither; ``eval`` (which does not preload)
    skips the held-out one and says so."""
    from click.testing import CliRunner
    from test_datasets import save_png

    from wgsl_splat.app.cli import main

    rng, seed = fresh_rng()
    scene, out = tmp_path / "scene", tmp_path / "r"
    _colmap_with_masks(scene, rng, n=9)
    held_out = f"img_{int(rng.choice([0, 8])):02d}.png"       # --eval holds out views 0 and 8
    trained = f"img_{int(rng.integers(1, 8)):02d}.png"
    for name in (held_out, trained):
        save_png(scene / "masks" / name, np.zeros((30, 40), np.uint8))
    res = CliRunner().invoke(main, ["train", str(scene), "--out", str(out), "--device", "cpu",
                                    "--preset", "smoke", "--eval", "--iters", "3"])
    assert res.exit_code == 0, f"seed={seed}: {res.output}"
    assert "Training 6 views (1 held out)" in res.output
    assert (out / "point_cloud" / "iteration_3" / "point_cloud.ply").is_file()
    assert (out / "checkpoints" / "ckpt_000003.npz").is_file()
    final = json.loads((out / "metrics.json").read_text())["iteration_3"]
    assert final["views"] == 1 and held_out not in final["per_view"]
    notes = json.loads((out / "cfg.json").read_text())["dataset_notes"]
    assert any(n.startswith("2 views left out of training and scoring") for n in notes)
    res = CliRunner().invoke(main, ["eval", str(out), "--device", "cpu"])
    assert res.exit_code == 0 and "Traceback" not in res.output, f"seed={seed}: {res.output}"
    again = json.loads((out / "metrics.json").read_text())["eval_iteration_3"]
    assert again["views"] == 1 and again["skipped"] == [held_out]
    assert f"1 skipped: the mask of {held_out} leaves no pixel" in again["line"]
    assert again["mean"]["psnr"] == pytest.approx(final["mean"]["psnr"], abs=0.05)
