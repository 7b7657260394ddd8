"""The photos as SfM and the trainer read them: upright (the EXIF orientation applied, then
dropped), downscaled to a longest side, written once into ``images/``, and grouped into cameras by
size and EXIF (maker, model, focal length), each group with its focal-length prior.

Why copies: COLMAP reads pixels as stored, ignoring the EXIF orientation tag, and so does
:func:`~wgsl_splat.data.images.read_image`; a phone's portrait photo stored sideways with a
rotate tag is then a landscape image to both, which agrees but is not what the user sees, and
another trainer (or viewer) that honours the tag would disagree with the poses. Writing the
pixels upright without the tag makes every reader see the same image.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..images import reason

# EXIF tags (the Exif sub-IFD)
_EXIF_IFD = 0x8769
_MAKE, _MODEL = 0x010F, 0x0110
_FOCAL, _FOCAL_35MM = 0x920A, 0xA405
_PLANE_XRES, _PLANE_UNIT = 0xA20E, 0xA210
_UNIT_MM = {2: 25.4, 3: 10.0, 4: 1.0, 5: 0.001}
DEFAULT_FOCAL_FACTOR = 1.2   # COLMAP's guess without EXIF: f = 1.2 · longest side


@dataclass(frozen=True)
class Group:
    """The photos that share a camera: one size, one maker/model/focal length."""

    width: int
    height: int
    focal: float          # px at (width, height)
    prior: bool           # the focal length came from EXIF
    names: tuple


def focal_prior(exif, width: int, height: int, orig_long: int) -> float | None:
    """The focal length in pixels of an image ``width`` × ``height`` from EXIF, None without one:
    FocalLengthIn35mmFilm (a 36 mm-wide frame on the long side), else FocalLength and the focal
    plane's resolution (the sensor's width)."""
    sub = exif.get_ifd(_EXIF_IFD)
    long_side = max(width, height)
    f35 = _number(sub.get(_FOCAL_35MM))
    if f35:
        return f35 / 36.0 * long_side
    f, xres = _number(sub.get(_FOCAL)), _number(sub.get(_PLANE_XRES))
    unit = _UNIT_MM.get(int(_number(sub.get(_PLANE_UNIT)) or 2))
    if f and xres and unit:
        sensor_mm = orig_long / xres * unit   # pixels / (pixels per unit) · mm per unit
        if sensor_mm > 0:
            return f / sensor_mm * long_side
    return None


def _number(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return v if v > 0 else None


def write_upright(src: Path, dst: Path, max_side: int) -> tuple[int, int, tuple]:
    """``src`` upright and at most ``max_side`` px on a side, as ``dst`` (no EXIF): its size and
    camera key (size, maker, model, focal prior). Raises OSError/ValueError for a bad file."""
    from PIL import Image, ImageOps

    with Image.open(src) as im:
        exif = im.getexif()
        w0, h0 = im.size
        if max(w0, h0) > 2 * max_side:   # JPEG: decode at a fraction of the size, much faster
            im.draft("RGB", (w0 * max_side // max(w0, h0), h0 * max_side // max(w0, h0)))
        up = ImageOps.exif_transpose(im).convert("RGB")
    long0 = max(w0, h0)
    k = max_side / max(up.size)
    if k < 1:
        up = up.resize((max(1, round(up.width * k)), max(1, round(up.height * k))),
                       Image.Resampling.LANCZOS)
    dst.parent.mkdir(parents=True, exist_ok=True)
    up.save(dst, quality=95) if dst.suffix.lower() in (".jpg", ".jpeg") else up.save(dst)
    focal = focal_prior(exif, up.width, up.height, long0)
    key = (up.width, up.height, str(exif.get(_MAKE, "")).strip(), str(exif.get(_MODEL, "")).strip(),
           None if focal is None else round(focal, 1))
    return up.width, up.height, key


def write_photos(files: list[Path], images: Path, max_side: int, progress=None):
    """Every readable photo of ``files`` written upright into ``images``: ``(groups, unreadable)``
    (unreadable: ``"name (why)"`` lines)."""
    keys, bad = {}, []
    for f in files:
        try:
            _, _, key = write_upright(f, images / f.name, max_side)
        except Exception as exc:  # noqa: BLE001 - PIL raises many types for bad files
            bad.append(f"{f.name} ({reason(exc)})")
        else:
            keys.setdefault(key, []).append(f.name)
        if progress:
            progress(1)
    return groups_of(keys), bad


def groups_of(keys: dict) -> list[Group]:
    out = []
    for (w, h, _make, _model, focal), names in keys.items():
        out.append(Group(w, h, focal or DEFAULT_FOCAL_FACTOR * max(w, h), focal is not None,
                         tuple(names)))
    return out
