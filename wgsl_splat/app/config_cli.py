"""The ``train`` command's configuration flags, generated from the declarations of
:class:`~wgsl_splat.training.config.TrainConfig` (:mod:`wgsl_splat.options`): flag, type, range,
choices and help come from the field; the help's defaults are computed from the presets and the
strategies' loss terms, so no default is written twice. Flags are applied only when given, on top
of the preset; a flag of another strategy's section is refused (when the run resumes, every flag
is compared with the run's own configuration instead)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import click

from .. import options
from ..options import PRESET_NAMES, Declared
from ..training.config import TrainConfig, make_config, preset_strategy
from .common import FiniteFloat


@dataclass(frozen=True)
class ConfigFlag:
    param: str            # click's parameter name
    declared: Declared    # its option (a shared one's: the first strategy's section)
    shared: tuple[Declared, ...] = ()   # an option the strategies share: each section's

    @property
    def declarations(self) -> tuple[Declared, ...]:
        return self.shared or (self.declared,)

    @property
    def name(self) -> str:
        """The flag as messages name it (``--densify-from``)."""
        return self.declared.option.flag.split("/")[0]

    @property
    def sections(self) -> str:
        """The strategies whose sections have it: ``adc``, ``adc or fast``."""
        return " or ".join(section_of(d) for d in self.declarations)

    def path_for(self, strategy: str) -> str | None:
        """The option it sets in a run of ``strategy`` (None: only other strategies have it)."""
        for d in self.declarations:
            if section_of(d) in (None, strategy):
                return d.path
        return None


def _param_name(flag: str) -> str:
    return flag.split("/")[0].lstrip("-").replace("-", "_")


def _show(value) -> str:
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@functools.lru_cache(maxsize=None)
def _help_config(preset: str, strategy: str | None = None) -> TrainConfig:
    """``make_config``'s configuration, made once for the help texts (which only read it)."""
    return make_config(preset, strategy)


def _defaults_text(d: Declared) -> str:
    """'default 500; smoke: 50; fast: 5000 (--strategy adc or mcmc: 7000)' from the presets, each
    under its own strategy and, where another strategy's schedule differs, that one (and the
    strategies' loss terms)."""
    from ..strategy import STRATEGIES

    base = options.get_path(_help_config("default"), d.path)
    if d.option.is_flag or "/" in (d.option.flag or ""):
        return ""
    parts = [f"default {_show(base)}"]
    for name in PRESET_NAMES:
        if name != "default":
            value = options.get_path(_help_config(name), d.path)
            others = _other_strategies(name, d.path, value)
            if value != base or others:
                parts.append(f"{name}: {_show(value)}{others}")
    if d.path.startswith("loss."):
        for sname, cls in STRATEGIES.items():
            key = d.path.split(".", 1)[1]
            if key in cls.loss_defaults:
                parts.append(f"--strategy {sname}: {_show(cls.loss_defaults[key])}")
    return "; ".join(parts)


def _other_strategies(preset: str, path: str, value) -> str:
    """' (--strategy adc or mcmc: 7000)': where a strategy other than the preset's own gets
    another value of ``path`` from the preset's schedule for it (its loss terms, the same under
    every preset, are said apart)."""
    from ..strategy import STRATEGIES

    by_value = {}
    for sname in STRATEGIES:
        if sname == preset_strategy(preset):
            continue
        other = options.get_path(_help_config(preset, sname), path)
        if other != value and other != options.get_path(_help_config("default", sname), path):
            by_value.setdefault(_show(other), []).append(sname)
    return "".join(f" (--strategy {' or '.join(names)}: {shown})"
                   for shown, names in by_value.items())


def preset_help() -> str:
    """``--preset``'s help: each preset's steps and strategy, computed as the run will be."""
    parts = []
    for name in PRESET_NAMES:
        cfg = _help_config(name)
        parts.append(f"{name}: {TrainConfig.PRESET_PURPOSE[name]}, {cfg.iters} steps of "
                     f"{cfg.strategy}{_other_strategies(name, 'iters', cfg.iters)}")
    return ("; ".join(parts) + ". --strategy trains that strategy instead, on the preset's "
            "schedule for it.")


def section_of(d: Declared) -> str | None:
    """The strategy whose section declares ``d`` (None: not a strategy's)."""
    head = d.path.split(".", 1)[0]
    return head if head in TrainConfig().strategies else None


def config_flags() -> list[ConfigFlag]:
    """Every declared option with a command-line flag, in declaration order (names unique). An
    option several strategies share with its flag (``split_clone_prune.shared_option``) is one
    flag, setting the option of whichever strategy the run trains."""
    flags: dict[str, ConfigFlag] = {}
    for d in options.walk(TrainConfig()):
        if d.option.flag is None:
            continue
        name = _param_name(d.option.flag)
        first = flags.get(name)
        if first is None:
            flags[name] = ConfigFlag(name, d)
        elif _one_shared_option(first.declarations, d):
            flags[name] = dataclasses.replace(first, shared=first.declarations + (d,))
        else:
            raise ValueError(f"flag {d.option.flag} is declared twice ({first.declared.path} and "
                             f"{d.path})")
    return list(flags.values())


def _one_shared_option(declared: tuple[Declared, ...], d: Declared) -> bool:
    """Whether ``d`` is the option ``declared`` are, in another strategy's section."""
    sections = {section_of(x) for x in declared}
    return (section_of(d) is not None and None not in sections and section_of(d) not in sections
            and all(x.name == d.name and x.option == d.option for x in declared))


def _click_type(d: Declared):
    opt = d.option
    choices = opt.choice_list()
    if choices is not None and opt.from_flag is None:
        return click.Choice(list(choices))
    if opt.parse is not None:
        return str
    kind = type(d.default)
    if kind is int:
        return click.IntRange(min=opt.minimum, max=opt.maximum, min_open=opt.open_min)
    if kind is float:
        return FiniteFloat(min=opt.minimum, max=opt.maximum, min_open=opt.open_min)
    return str


def add_config_flags(command):
    """Decorate a click command with every configuration flag (values None unless given)."""
    for cf in reversed(config_flags()):
        d, opt = cf.declared, cf.declared.option
        help_text = (f"{cf.sections}: " if section_of(d) else "") + opt.help
        if d.path == "strategy":
            from ..strategy import STRATEGIES

            help_text += " " + "; ".join(f"{n}: {' '.join((c.__doc__ or '').split()).rstrip('.')}"
                                         for n, c in STRATEGIES.items()) + "."
        extra = _defaults_text(d)
        if extra:
            help_text += f" [{extra}]"
        if opt.is_flag:
            decorator = click.option(opt.flag, cf.param, is_flag=True, default=None, help=help_text)
        elif "/" in opt.flag:
            decorator = click.option(opt.flag, cf.param, default=None, help=help_text)
        else:
            decorator = click.option(opt.flag, cf.param, type=_click_type(d), default=None,
                                     metavar=opt.metavar, help=help_text)
        command = decorator(command)
    return command


def given_config_flags(ctx: click.Context) -> list[ConfigFlag]:
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return [cf for cf in config_flags() if ctx.get_parameter_source(cf.param) in sources]


def flag_value(cf: ConfigFlag, raw):
    """The configuration value of a flag's command-line value (a one-line click error if bad)."""
    opt = cf.declared.option
    if opt.from_flag is not None:
        return opt.from_flag(raw)
    if opt.parse is not None:
        try:
            return opt.parse(raw)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=opt.flag) from None
    return raw


def configure(preset: str, strategy: str | None, given: list[ConfigFlag], values: dict,
              resuming: bool = False) -> TrainConfig:
    """The run's configuration: the preset for the strategy (None: the preset's own), then the
    given flags (``--iters`` first: it trims the evaluation steps that ``--eval-at`` may then set).

    A flag of another strategy's section is refused, except when the run resumes (``resuming``):
    then the strategy is the checkpoint's, not the default, and every given flag is compared with
    the resumed run's own configuration instead (``ResumeCheck`` in :mod:`.train`)."""
    cfg = make_config(preset, strategy)
    for cf in sorted(given, key=lambda c: c.declared.path != "iters"):
        path = cf.path_for(cfg.strategy)
        if path is None and not resuming:
            raise click.UsageError(f"{cf.declared.option.flag} is an option of --strategy "
                                   f"{cf.sections}, and this run trains {cfg.strategy}")
        path = path or cf.declared.path
        value = flag_value(cf, values[cf.param])
        if path == "iters":
            cfg.with_iters(value)
        elif path != "strategy":
            options.set_path(cfg, path, value)
    return cfg
