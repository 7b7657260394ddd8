"""The render configuration: every constant of the splatting math and the render mode, in one place.

The NumPy reference reads a :class:`RenderConfig`; the WGSL shaders get the same values from it as
a generated ``render_config.wgsl`` (:meth:`RenderConfig.wgsl`, included by ``common.wgsl``), and
the renderer's per-render uniform derives its runtime values (the frustum clamp times the camera's
field of view) from it too. Nothing below is written anywhere else.

Two modes:

``classic``
    3DGS: the projected covariance dilated by 0.3 px², opacity as trained (docs/design.md §2).

``antialiased``
    Mip-Splatting (Yu et al., CVPR 2024), both of its filters:

    - **2D Mip filter** (what gsplat calls ``rasterize_mode="antialiased"``): the projected
      covariance dilated by ``mip_filter_2d`` and the opacity multiplied by the compensation
      ``sqrt(det Σ2D / det(Σ2D + εI))``, so that a splat keeps its energy when the dilation widens
      it; the gradient flows through the determinant ratio.
    - **3D smoothing filter**: each Gaussian's covariance widened by ``filter_3d²·I`` with
      ``filter_3d = sqrt(filter_3d_variance) / ν_max``, ν_max the highest sampling rate
      (focal length / depth) at which a training camera sees it, and the opacity multiplied by
      ``sqrt(det Σ / det(Σ + filter_3d²·I))``.

    ε = 0.1 px², not gsplat's default 0.3: gsplat keeps its ``eps2d`` parameter at the classic
    dilation for both modes, while Mip-Splatting, whose 2D filter this is, sets it to 0.1 (its
    ``kernel_size``): a Gaussian of 0.1 px² variance approximates the one-pixel box filter of a
    pixel's footprint (variance 1/12 px²), and together with the 3D filter's 0.2 px² at the training
    cameras' sampling rate it makes the same 0.3 px² of blur as the classic dilation at the
    training resolution — so the model trains like 3DGS at that scale and stays band-limited at the
    others. The 3D filter's constants (0.2, the 0.2 near limit, the 15 % frustum margin) are those
    of Mip-Splatting's ``compute_3D_filter``.
"""

from __future__ import annotations

from dataclasses import dataclass

RENDER_MODES = ("classic", "antialiased")


class RenderModeError(ValueError):
    """An unknown render mode (in a command line, a cfg.json or a PLY header)."""


def check_mode(mode: str, where: str = "render mode") -> str:
    if mode not in RENDER_MODES:
        raise RenderModeError(f"unknown {where} {mode!r}; expected one of {', '.join(RENDER_MODES)}")
    return mode


@dataclass(frozen=True)
class RenderConfig:
    mode: str = "classic"
    near_plane: float = 0.01            # cull Gaussians whose camera-space z is below this
    frustum_clamp: float = 1.3          # view-ray tangent clamped to ±this·tan(half-fov) in J
    classic_dilation: float = 0.3       # px² added to Σ2D in the classic mode
    mip_filter_2d: float = 0.1          # px² of the 2D Mip filter in the antialiased mode
    filter_3d_variance: float = 0.2     # px² of the 3D filter at the highest training sampling rate
    filter_3d_near: float = 0.2         # cameras closer than this (camera-space z) do not count
    filter_3d_margin: float = 0.15      # ... nor those whose image the mean misses by more than 15 %
    alpha_min: float = 1.0 / 255.0      # skip a pair whose α is below this
    alpha_max: float = 0.99             # α clamp
    t_min: float = 1e-4                 # a pixel stops once its transmittance would drop below this
    tile_size: int = 16                 # pixels per tile side
    # A (tile, splat) pair is kept when the splat's α ≥ alpha_min ellipse, q = dᵀ·conic·d ≤
    # 2 ln(o / alpha_min), reaches the rectangle of the tile's pixel centres, tested with this
    # relative margin (and as much absolute, in q): a pair left out then has α below alpha_min by a
    # clear margin at every pixel of the tile, so float32 and float64 disagree only on pairs that
    # composite nowhere (see reference.projection.tile_min_q).
    tile_test_margin: float = 1e-3

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.tile_size != 16:   # the rasteriser's workgroups are laid out for 16x16 tiles
            raise ValueError(f"tile_size must be 16, got {self.tile_size}")

    @property
    def antialiased(self) -> bool:
        return self.mode == "antialiased"

    @property
    def dilation(self) -> float:
        """px² added to the projected covariance (the 2D filter's ε in the antialiased mode)."""
        return self.mip_filter_2d if self.antialiased else self.classic_dilation

    def wgsl(self) -> str:
        """The WGSL constants of this configuration (the generated ``render_config.wgsl``).

        Floats are written with Python's ``repr`` (the shortest decimal that round-trips the
        double), so the shader compiler rounds exactly the value the reference uses to f32."""
        lines = [
            "// Generated from wgsl_splat/render_config.py (RenderConfig); not a file on disk.",
            f"const TILE_SIZE: u32 = {int(self.tile_size)}u;",
            f"const NEAR_PLANE: f32 = {float(self.near_plane)!r};",
            f"const COV2D_DILATION: f32 = {float(self.dilation)!r};",
            f"const ALPHA_MIN: f32 = {float(self.alpha_min)!r};",
            f"const ALPHA_MAX: f32 = {float(self.alpha_max)!r};",
            f"const T_MIN: f32 = {float(self.t_min)!r};",
            f"const TILE_TEST_MARGIN: f32 = {float(self.tile_test_margin)!r};",
            f"const ANTIALIASED: bool = {str(self.antialiased).lower()};",
            f"const FILTER_3D_NEAR: f32 = {float(self.filter_3d_near)!r};",
            f"const FILTER_3D_MARGIN: f32 = {float(self.filter_3d_margin)!r};",
            f"const FILTER_3D_SCALE: f32 = {float(self.filter_3d_variance) ** 0.5!r};",
        ]
        return "\n".join(lines) + "\n"


CLASSIC = RenderConfig()
ANTIALIASED = RenderConfig(mode="antialiased")


def render_config(mode: str) -> RenderConfig:
    """The configuration of ``mode`` (``classic`` or ``antialiased``)."""
    return RenderConfig(mode=check_mode(mode))
