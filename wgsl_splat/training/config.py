"""The training configuration: one tree of dataclasses whose fields declare their own options
(:mod:`wgsl_splat.options`). The ``train`` command's flags, ``cfg.json``, checkpoints and the resume
check are generated from it; presets are the ``PRESETS`` overrides each class declares.

Sections: :class:`~wgsl_splat.contract.losses.LossConfig` (``loss``), the optimiser
(:class:`~wgsl_splat.contract.optim.OptimConfig`, ``optim``) and one per registered strategy
(``adc``, ``mcmc``, ...: the strategy's ``Config``, see :mod:`wgsl_splat.strategy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import options
from ..contract.losses import LossConfig
from ..contract.optim import CONSTANT_RATES, OptimConfig
from ..options import option, section
from ..render_config import RENDER_MODES, check_mode
from ..strategy import STRATEGIES, strategy_names

# steps at which test views are evaluated (the 3DGS paper's 7k and 30k, plus the early curve)
EVAL_AT = (1_000, 2_000, 3_000, 7_000, 15_000, 30_000)


def parse_steps(text: str) -> tuple:
    """``"1000,7000"`` -> (1000, 7000), sorted and unique (ValueError with one line otherwise; the
    range is checked against the run's length by :meth:`TrainConfig.check`)."""
    try:
        steps = sorted({int(s) for s in str(text).split(",") if s.strip()})
    except ValueError:
        steps = []
    if not steps:
        raise ValueError(f"takes comma-separated step numbers, got {text!r}")
    return tuple(steps)


def _strategy_configs() -> dict:
    return {name: cls.Config() for name, cls in STRATEGIES.items()}


@dataclass
class TrainConfig:
    """A training run's configuration (3DGS's defaults; docs/design.md §2)."""

    PRESETS = {
        # a short run with the whole schedule compressed (densification or relocation, opacity
        # resets and SH growth all happen), for quick checks
        "smoke": dict(iters=300, sh_increase_every=100, eval_at=(300,), save_at=(300,),
                      checkpoint_every=100, log_every=25, random_init_points=5000),
        # the fast mode: the fast strategy, on its own schedule (Fast.run_presets); another
        # --strategy trains 7k steps, 3DGS's first evaluation point
        "fast": dict(strategy="fast", iters=7000, eval_at=(1000, 2000, 3000, 7000),
                     save_at=(7000,)),
    }
    #: what each preset is for (``train --preset``'s help adds the steps per strategy, computed)
    PRESET_PURPOSE = {"smoke": "quick checks with the whole schedule compressed",
                      "fast": "the fast mode", "default": "the original schedule"}

    iters: int = option(30_000, "Number of training steps.", flag="--iters", minimum=1)
    sh_degree: int = option(3, "Maximum SH degree.", flag="--sh-degree", minimum=0, maximum=3)
    sh_increase_every: int = option(1000, "Steps between increases of the active SH degree.",
                                    minimum=1)
    batch_size: int = option(
        1, "Views per step: the gradient of their mean loss, densification statistics from every "
           "view, Adam scaled as gsplat does (rates ×√B, β ← 1−B(1−β)).",
        flag="--batch-size", minimum=1)
    background: tuple = option(
        (0.0, 0.0, 0.0), "Train against a white background (synthetic scenes); default black.",
        flag="--white-background", is_flag=True,
        from_flag=lambda on: (1.0, 1.0, 1.0) if on else (0.0, 0.0, 0.0))
    seed: int = option(0, "Random seed (initialisation, view order, densification draws).",
                       flag="--seed", minimum=0)
    eval_at: tuple = option(EVAL_AT, "Comma-separated steps at which the held-out views are "
                                     "evaluated (the last step always is).",
                            flag="--eval-at", parse=parse_steps, metavar="STEPS")
    save_at: tuple = option((7_000, 30_000), "Steps at which a PLY is written (the last step "
                                             "always is).", parse=parse_steps)
    checkpoint_every: int = option(1000, "Steps between checkpoints.", minimum=1)
    log_every: int = option(100, "Steps between log lines.", minimum=1)
    random_init_points: int = option(100_000, "Random points to start from when the scene has no "
                                              "point cloud.", minimum=1)
    # issue 36: SfM finds no points on textureless background, which a model then draws with
    # Gaussians grown from the cloud's outliers into the scene's size among the cameras (mouse)
    background_fraction: float = option(
        0.5, "A run from a point cloud also starts from this many points per cloud point, spread "
             "over a sphere beyond the cameras and the cloud (those a training view sees): a "
             "place for the background the cloud has no points on (walls, a desk, the sky; "
             "0: off).", flag="--background-fraction", minimum=0.0)
    background_radius: float = option(
        1.5, "That sphere's radius, x the radius around the training cameras' centre that holds "
             "them all and 99% of the cloud.", minimum=1.0)
    lpips: bool = option(True, "LPIPS-VGG at the final evaluation when installed.")
    render_mode: str = option(
        "classic", "Train and render with Mip-Splatting's filters (3D smoothing + 2D Mip filter), "
                   "for models that stay sharp and alias-free at other resolutions and distances; "
                   "default classic 3DGS.",
        flag="--antialiased/--classic", choices=RENDER_MODES,
        from_flag=lambda on: "antialiased" if on else "classic")
    strategy: str = option("adc", "Densification strategy.", flag="--strategy",
                           choices=strategy_names)
    appearance: bool = option(
        False, "Learn a 3x4 affine colour transform per training view with the model (exposure / "
               "white-balance compensation, as Inria's); training-only: held-out views are scored "
               "without one, the PLY stays standard.", flag="--appearance", is_flag=True)
    pose_opt: bool = option(
        False, "Learn a 6-DoF correction of every training view's pose with the model (gsplat's "
               "pose_opt), for captures whose poses are slightly off; training-only: held-out "
               "views keep their loaded poses, the PLY stays standard.", flag="--pose-opt",
        is_flag=True)
    loss: LossConfig = section(LossConfig)
    optim: OptimConfig = section(OptimConfig)
    strategies: dict = field(default_factory=_strategy_configs)

    def __post_init__(self) -> None:
        check_mode(self.render_mode)

    # -- the strategies' sections -----------------------------------------------------------------
    def dynamic_sections(self) -> dict:
        return self.strategies

    def set_dynamic_section(self, name: str, value) -> None:
        self.strategies[name] = value

    @property
    def strategy_config(self):
        """The active strategy's section."""
        return self.strategies[self.strategy]

    # -- derived settings ---------------------------------------------------------------------------
    def with_iters(self, iters: int) -> None:
        """A run of ``iters`` steps: evaluation and PLY steps beyond it dropped, the last added."""
        self.iters = int(iters)
        self.eval_at = tuple(s for s in self.eval_at if s < iters) + (self.iters,)
        self.save_at = tuple(s for s in self.save_at if s < iters) + (self.iters,)

    def check(self) -> None:
        """Every option within its declared range (ValueError naming the flag); steps in range."""
        options.check(self)
        bad = [s for s in self.eval_at if not 1 <= s <= self.iters]
        if bad:
            raise ValueError(f"--eval-at {','.join(map(str, self.eval_at))}: steps must lie "
                             f"between 1 and {self.iters} (the run's length)")

    # -- files ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = options.to_dict(self)
        d.pop("strategies")       # written as one section per strategy (options.to_dict)
        return d

    @staticmethod
    def from_dict(d: dict) -> "TrainConfig":
        return options.from_dict(TrainConfig, _upgrade(dict(d)), where="configuration")


def _upgrade(d: dict) -> dict:
    """Configurations written by earlier versions, as this one reads them."""
    if "densify" in d:    # checkpoints before the strategies (format 2) called ADC's "densify"
        d.setdefault("adc", d.pop("densify"))
    if "adc" in d:        # runs configured before the observation cap grew without it
        d["adc"] = dict(d["adc"])
        d["adc"].setdefault("max_params_per_observation", 0.0)
        # 2026-11-28: densification validated on withheld views; a run begun without it goes on so
        d["adc"].setdefault("validation_every_nth", 0)
    if "fast" in d:       # the budget by observed values, before the budget by the views' detail
        d["fast"] = {k: v for k, v in d["fast"].items()
                     if k not in ("budget_per_observation", "full_view_pixels")}
        # 2026-11-28: growth validated on withheld views; a run begun without it goes on so
        d["fast"].setdefault("validation_every_nth", 0)
    # 2026-11-29: the background shell; a run configured before it started without one
    d.setdefault("background_fraction", 0.0)
    if "constant_lr_scale" in d.get("optim", {}):   # 2026-11-28: the fast preset's first rates
        d["optim"] = dict(d["optim"])
        factor = d["optim"].pop("constant_lr_scale")
        for key in CONSTANT_RATES.values():   # the same rates (bit for bit at its 2.0)
            d["optim"][key] = factor * d["optim"].get(key, options.default_of(OptimConfig, key))
    if "cooldown_steps" in d.get("optim", {}):   # 2026-11-29: the cool-down became a fraction
        d["optim"] = dict(d["optim"])
        steps = d["optim"].pop("cooldown_steps")
        d["optim"]["cooldown_fraction"] = steps / d["iters"] if steps and d.get("iters") else 0.0
    if "optim" in d and "appearance_centring" not in d["optim"]:
        # 2026-11-29: the per-view colour maps centred on the identity; a run begun free goes on so
        d["optim"] = dict(d["optim"])
        d["optim"]["appearance_centring"] = 0.0
    loss = dict(d.get("loss", {}))
    if "lambda_dssim" in d:   # before the loss section
        loss.setdefault("lambda_dssim", d.pop("lambda_dssim"))
    if "mcmc" in d:           # MCMC's regularisers, now loss terms
        d["mcmc"] = dict(d["mcmc"])
        for key in ("opacity_reg", "scale_reg"):
            if key in d["mcmc"]:
                value = d["mcmc"].pop(key)
                if d.get("strategy") == "mcmc":
                    loss.setdefault(key, value)
    if loss:
        d["loss"] = loss
    return d


def preset_strategy(preset: str) -> str:
    """The strategy ``preset`` trains when no ``--strategy`` is given: the preset's override of
    ``strategy`` (``TrainConfig.PRESETS``), else the default."""
    overrides = dict(options.preset_overrides(TrainConfig(), preset))
    return overrides.get("strategy", options.default_of(TrainConfig, "strategy"))


def make_config(preset: str = "default", strategy: str | None = None) -> TrainConfig:
    """The configuration a run starts from before its flags: the defaults, the strategy's loss
    terms (``Strategy.loss_defaults``), the preset's overrides, then the strategy's own for that
    preset (``Strategy.run_presets``: its schedule). ``strategy``: the one named by
    ``--strategy``; None: the preset's own (:func:`preset_strategy`)."""
    strategy = strategy or preset_strategy(preset)
    cfg = TrainConfig()
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    cfg.strategy = strategy
    for key, value in STRATEGIES[strategy].loss_defaults.items():
        setattr(cfg.loss, key, value)
    for path, value in options.preset_overrides(cfg, preset):
        if path != "strategy":     # settled above: a named strategy replaces the preset's
            options.set_path(cfg, path, value)
    for path, value in STRATEGIES[strategy].run_presets.get(preset, {}).items():
        options.set_path(cfg, path, value)
    return cfg


def preset(name: str, strategy: str | None = None) -> TrainConfig:
    """``default``: the original 30k-step schedule. ``smoke``: a short run with the same schedule
    compressed for quick checks. ``fast``: the fast mode (the fast strategy's schedule; with
    another ``strategy``, 7k steps as 3DGS's first evaluation point)."""
    return make_config(name, strategy)
