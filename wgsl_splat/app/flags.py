"""A command's flags declared once, as the fields of a frozen dataclass (the command's request), as
the training configuration declares its options (:mod:`wgsl_splat.options`): the click parameters
are generated from the fields (:func:`add_flags`), and the command's code receives one record
(:func:`split_request`) instead of a parameter per flag. A flag several commands share is one
:class:`Flag` value (``common.DEVICE``), made a field wherever it is used (:meth:`Flag.field`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class Flag:
    """One click parameter: ``decls`` its names (``("-r", "--resolution")``; none: a positional
    argument), ``settings`` click's keyword arguments (``default`` among them)."""

    decls: tuple
    settings: dict

    @property
    def default(self):
        if "default" in self.settings:
            return self.settings["default"]
        if self.settings.get("multiple"):
            return ()
        return False if self.settings.get("is_flag") else None

    @property
    def label(self) -> str:
        """How messages name the flag: ``-r/--resolution``."""
        return "/".join(self.decls)

    def field(self, **meta) -> Any:
        """A dataclass field holding this flag's value; ``meta``: what else the request declares
        of it (e.g. how a resumed run treats it)."""
        return dataclasses.field(default=self.default, metadata={"flag": self, **meta})

    def decorator(self, name: str):
        """click's decorator for this flag, its value passed as ``name``."""
        if self.decls:
            return click.option(*self.decls, name, **self.settings)
        return click.argument(name, **self.settings)


def flag(*decls: str, meta: dict | None = None, **settings) -> Any:
    """A request field declared with its flag (``settings``: click's keyword arguments)."""
    return Flag(decls, settings).field(**(meta or {}))


def argument(meta: dict | None = None, **settings) -> Any:
    """A request field declared as a positional argument."""
    return Flag((), settings).field(**(meta or {}))


def flags_of(cls) -> dict[str, Flag]:
    """Field name -> its :class:`Flag`, in declaration order (the order ``--help`` lists them)."""
    return {f.name: f.metadata["flag"] for f in dataclasses.fields(cls) if "flag" in f.metadata}


def add_flags(cls):
    """Decorate a click command with the flags of request class ``cls``, in declaration order."""
    def decorate(command):
        for name, declared in reversed(list(flags_of(cls).items())):
            command = declared.decorator(name)(command)
        return command
    return decorate


def split_request(cls, values: dict) -> tuple[Any, dict]:
    """``(request, the other values)`` of a click command's keyword arguments."""
    names = flags_of(cls)
    request = cls(**{k: v for k, v in values.items() if k in names})
    return request, {k: v for k, v in values.items() if k not in names}
