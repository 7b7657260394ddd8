"""Camera poses from what a person has: a folder of photos or a video, turned into an ordinary
COLMAP folder (``images/``, ``sparse/0/``) by pycolmap, the optional extra ``wgsl_splat[sfm]``.

One concern per module: :mod:`.inputs` (what a path holds, the settings, the fingerprint a result
is keyed on), :mod:`.photos` (the upright, downscaled copies and the cameras they group into),
:mod:`.video` (sharp frames sampled evenly), :mod:`.reconstruct` (pycolmap: features, matching,
mapping), :mod:`.scene` (the whole run, written atomically, reused when its key matches).
docs/sfm.md has the measurements behind the defaults.
"""

from .inputs import SfmError, SfmSettings, sfm_input_kind
from .scene import SfmResult, cached_scene_dir, make_scene

__all__ = ["SfmError", "SfmResult", "SfmSettings", "cached_scene_dir", "make_scene",
           "sfm_input_kind"]
