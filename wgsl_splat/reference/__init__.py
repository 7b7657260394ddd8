"""NumPy reference implementation: the same math as the WGSL shaders, in float32 or float64.

It is the CPU fallback and the oracle the GPU kernels are tested against; it is itself checked
against finite differences in float64 (tests/test_reference_gradients.py).
"""

from ..contract.sh import eval_sh, eval_sh_backward
from .filter3d import compute_filter_3d
from .loss import (
                     gaussian_blur,
                     gaussian_window_1d,
                     l1,
                     loss_and_grad,
                     psnr,
                     ssim,
                     ssim_map,
)
from .projection import Projection, project, project_backward
from .raster import (
                     RasterResult,
                     RasterStructure,
                     ScreenGrads,
                     bin_and_sort,
                     rasterize,
                     rasterize_backward,
)
from .render import Gradients, RenderOutput, render, render_backward, render_image

__all__ = [
    "Gradients", "Projection", "compute_filter_3d",
    "RasterResult", "RasterStructure", "RenderOutput", "ScreenGrads", "bin_and_sort", "eval_sh",
    "eval_sh_backward", "gaussian_blur", "gaussian_window_1d", "l1", "loss_and_grad", "project", "project_backward", "rasterize", "rasterize_backward",
    "psnr", "render", "render_backward", "render_image", "ssim", "ssim_map",
]
