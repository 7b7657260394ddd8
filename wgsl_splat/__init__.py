"""wgsl_splat: 3D Gaussian Splatting whose training step runs as WGSL compute shaders.

The NumPy reference in :mod:`wgsl_splat.reference` implements the same math as the shaders and is
the oracle every GPU kernel is tested against.
"""

from .camera import Camera
from .model import GaussianModel, num_sh_coeffs, sh_degree_from_coeffs

__all__ = ["Camera", "GaussianModel", "num_sh_coeffs", "sh_degree_from_coeffs"]
__version__ = "0.1.0"
