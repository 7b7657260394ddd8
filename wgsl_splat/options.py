"""Options declared once: a configuration dataclass field carries its default, its command-line
flag, its range and its help (:func:`option`); the ``train`` command's flags (``app/config_cli.py``),
``cfg.json``, checkpoints and the resume check are generated from those declarations, and presets
are overrides declared by each configuration class itself (``PRESETS``).

A configuration is a tree of dataclasses: a field declared with :func:`section` holds a nested
configuration (the loss, the optimiser, each strategy's). :func:`walk` lists every declared option
of a tree with its dotted path (``adc.start``), :func:`get_path`/:func:`set_path` read and write by
path, :func:`preset_overrides` lists the preset overrides of every class in the tree (applied by
``training/config.py``'s ``make_config``, which settles the strategy first).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

PRESET_NAMES = ("smoke", "fast", "default")


@dataclass(frozen=True)
class Option:
    """What the command line and the docs need to know of a configuration field.

    ``flag``: the command-line flag (``--densify-from``; ``--a/--b`` for a boolean pair; None: the
    field is configuration only, still recorded in ``cfg.json``). ``minimum``/``maximum`` bound
    numbers (``open_min``: the bound itself is refused). ``choices`` restricts strings (a callable
    is evaluated when the CLI is built: registries that grow, e.g. the strategies). ``parse`` turns
    the flag's text into the field's value and ``from_flag`` maps a flag's value (a boolean) onto
    it; ``is_flag``: the flag takes no value."""

    help: str
    flag: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    open_min: bool = False
    choices: tuple | Callable[[], tuple] | None = None
    parse: Callable[[str], Any] | None = None
    from_flag: Callable[[Any], Any] | None = None
    is_flag: bool = False
    metavar: str | None = None

    def choice_list(self) -> tuple | None:
        return self.choices() if callable(self.choices) else self.choices

    def check(self, name: str, value) -> None:
        """Raise ValueError (one line) when ``value`` is outside the declared range or choices."""
        choices = self.choice_list()
        if choices is not None and value not in choices:
            raise ValueError(f"{name} {value!r} is not one of {', '.join(map(str, choices))}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{name} {value} is not a finite number")
            lo, hi = self.minimum, self.maximum
            if lo is not None and (value < lo or (self.open_min and value == lo)):
                raise ValueError(f"{name} {value} must be {'>' if self.open_min else '≥'} {lo:g}")
            if hi is not None and value > hi:
                raise ValueError(f"{name} {value} must be ≤ {hi:g}")


def option(default, help: str, **kw) -> Any:
    """A dataclass field with its :class:`Option` (keyword arguments as Option's)."""
    meta = {"option": Option(help=help, **kw)}
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls, help: str = "") -> Any:
    """A field holding a nested configuration of type ``cls`` (its own defaults)."""
    return field(default_factory=cls, metadata={"section": help or (cls.__doc__ or "").strip()})


def default_of(cls, name: str):
    """The declared default of field ``name`` of configuration class ``cls``."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


@dataclass(frozen=True)
class Declared:
    path: str             # "adc.start"
    owner: type           # the dataclass that declares it
    name: str             # the field name
    default: Any
    option: Option


def _sections(obj) -> Iterator[tuple[str, Any]]:
    """(name, nested configuration) of ``obj``: declared sections, then dynamic ones
    (``obj.dynamic_sections()``, e.g. the strategies' configurations)."""
    for f in dataclasses.fields(obj):
        if "section" in f.metadata:
            yield f.name, getattr(obj, f.name)
    extra = getattr(obj, "dynamic_sections", None)
    if extra is not None:
        yield from extra().items()


def walk(obj, prefix: str = "") -> Iterator[Declared]:
    """Every declared option of the configuration tree ``obj`` (an instance), depth first."""
    for f in dataclasses.fields(obj):
        opt = f.metadata.get("option")
        if opt is not None:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            yield Declared(prefix + f.name, type(obj), f.name, default, opt)
    for name, sub in _sections(obj):
        yield from walk(sub, f"{prefix}{name}.")


def node(obj, path: str):
    """The configuration holding ``path``'s field, and the field name."""
    *parents, name = path.split(".")
    for p in parents:
        obj = dict(_sections(obj))[p]
    return obj, name


def get_path(obj, path: str):
    """The value (or the nested configuration) at ``path``."""
    holder, name = node(obj, path)
    sections = dict(_sections(holder))
    return sections[name] if name in sections else getattr(holder, name)


def set_path(obj, path: str, value) -> None:
    """Set ``path`` (frozen sections, e.g. the optimiser's, are replaced by a copy)."""
    *parents, name = path.split(".")
    if not parents:
        _set(obj, name, value)
        return
    parent, sub_name = node(obj, ".".join(parents))
    sub = get_path(obj, ".".join(parents))
    if getattr(type(sub), "__dataclass_params__").frozen:
        new = dataclasses.replace(sub, **{name: value})
        _set_section(parent, sub_name, new)
    else:
        setattr(sub, name, value)


def _set(obj, name, value) -> None:
    if getattr(type(obj), "__dataclass_params__").frozen:
        raise TypeError(f"{type(obj).__name__} is frozen")
    setattr(obj, name, value)


def _set_section(parent, name, value) -> None:
    if hasattr(parent, "set_dynamic_section") and name not in {f.name for f in dataclasses.fields(parent)}:
        parent.set_dynamic_section(name, value)
    else:
        _set(parent, name, value)


def preset_overrides(obj, preset: str, prefix: str = "") -> list[tuple[str, Any]]:
    """``(path, value)`` of every override that ``preset`` makes in the tree ``obj``."""
    if preset not in PRESET_NAMES:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESET_NAMES)}")
    out = [(prefix + name, value)
           for name, value in getattr(type(obj), "PRESETS", {}).get(preset, {}).items()]
    for name, sub in _sections(obj):
        out += preset_overrides(sub, preset, f"{prefix}{name}.")
    return out


def to_dict(obj) -> dict:
    """The tree as plain JSON-able data (tuples become lists when written)."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out[f.name] = to_dict(value) if dataclasses.is_dataclass(value) else value
    extra = getattr(obj, "dynamic_sections", None)
    if extra is not None:
        for name, sub in extra().items():
            out[name] = to_dict(sub)
    return out


def from_dict(cls, data: dict, *, where: str = "configuration"):
    """An instance of ``cls`` from :func:`to_dict`'s output: unknown keys are an error naming
    them, missing keys keep their defaults; tuples are restored from lists."""
    obj = cls()
    known = {f.name: f for f in dataclasses.fields(cls)}
    dynamic = dict(obj.dynamic_sections()) if hasattr(obj, "dynamic_sections") else {}
    kwargs = {}
    for key, value in data.items():
        if key in known:
            current = getattr(obj, key)
            if dataclasses.is_dataclass(current) and isinstance(value, dict):
                kwargs[key] = from_dict(type(current), value, where=f"{where}.{key}")
            elif isinstance(current, tuple) and isinstance(value, list):
                kwargs[key] = tuple(value)
            else:
                kwargs[key] = value
        elif key in dynamic and isinstance(value, dict):
            kwargs.setdefault("__dynamic__", {})[key] = from_dict(type(dynamic[key]), value,
                                                                   where=f"{where}.{key}")
        else:
            raise ValueError(f"{where}: unknown setting {key!r}")
    dyn = kwargs.pop("__dynamic__", {})
    frozen = getattr(cls, "__dataclass_params__").frozen
    obj = cls(**kwargs) if frozen or kwargs else obj
    for name, sub in dyn.items():
        obj.set_dynamic_section(name, sub)
    return obj


def check(obj) -> None:
    """Every declared option of the tree within its range and choices (ValueError, one line)."""
    for d in walk(obj):
        d.option.check(d.option.flag or d.path, get_path(obj, d.path))
