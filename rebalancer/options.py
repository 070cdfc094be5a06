"""Operator options declared once: a record's field carries its name, type, default, range, choices and help.

``ExecOptions`` (``rebalancer.execute``) and ``PlanOptions`` (``rebalancer.plan``) are frozen dataclasses whose
operator-facing fields are made by ``option(default, help=..., ...)``. Everything an operator reads or writes is
generated from those fields (``option_fields``):

- the CLI's arguments (``add_arguments``) and the record's values from them (``given``: what was given, text options
  parsed, the rest left out so that the record's default applies);
- the argv of a plan run in another process, or handed to the Spark job (``to_argv``);
- the DAG form's params (``rebalancer_airflow.runbook_dag``, from ``OptionField.param`` and ``schema``).

So each default is written in one place: the field (or the constant it names). A text option (a rate, a size) is
typed as the parsed value (bytes/s) and read from text by ``Spec.text``, which raises the one-line ``InputError`` a
bad value gets everywhere; ``Spec.shown`` is its default as an operator writes it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Spec", "OptionField", "option", "option_fields", "number", "add_arguments", "given", "to_argv",
           "INT32_MAX"]

INT32_MAX = 2**31 - 1  # Kafka's broker ids, partition numbers and counts are Java ints

_KINDS: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}
_SCHEMA_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


@dataclass(frozen=True)
class Spec:
    """How an option reads to an operator. ``flag`` "" is ``--`` and the field's name with dashes; ``param`` "" is
    the field's name, None keeps it off the DAG form; ``above`` is an exclusive minimum."""

    help: str
    flag: str = ""
    param: str | None = ""
    title: str = ""
    section: str = ""
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    choices: Collection[str] = ()                  # read when a parser or form is made (a registry's keys view)
    unit: str = ""                                  # said after a bound in a range error (" seconds")
    text: Callable[[str], Any] | None = None        # the operator gives text, parsed by this (a one-line error)
    shown: str | None = None                        # a text option's default as the operator writes it
    pattern: str = ""                               # a text option's form on the DAG form (a regular expression)
    default_help: str = ""                          # what the default is, when the field's default (None) is not it
    repeat: bool = False                            # a text option given once per item (``--band disk=5``)
    unparse: Callable[[Any], list[str]] | None = None  # a text option's value -> the texts that give it
    metavar: str = ""


@dataclass(frozen=True)
class OptionField:
    """A record's option: its field's name, value type, whether None is allowed, default and ``Spec``."""

    name: str
    kind: type
    optional: bool
    default: Any
    spec: Spec

    @property
    def flag(self) -> str:
        return self.spec.flag or f"--{self.name.replace('_', '-')}"

    @property
    def param(self) -> str | None:
        return self.name if self.spec.param == "" else self.spec.param

    @property
    def shown_default(self) -> Any:
        """The default as an operator writes it (the text of a text option)."""
        return self.spec.shown if self.spec.text is not None else self.default

    def help(self, prefix: str = "") -> str:
        """The CLI's help: the spec's words and the default."""
        default = self.spec.default_help or ("" if self.shown_default in (None, False) else f"{self.shown_default:g}"
                                             if isinstance(self.shown_default, float) else str(self.shown_default))
        text = f"{prefix}{self.spec.help}" + (f" (default {default})" if default else "")
        return text.replace("%", "%%")

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the DAG param: type (with null when optional), range, choices, form."""
        kind = "string" if self.spec.text is not None else _SCHEMA_TYPES[self.kind]
        out: dict[str, Any] = {"type": ["null", kind] if self.optional else kind}
        for key, value in (("minimum", self.spec.minimum), ("exclusiveMinimum", self.spec.above),
                           ("maximum", self.spec.maximum)):
            if value is not None and self.spec.text is None:
                out[key] = value
        if self.spec.choices:
            out["enum"] = list(self.spec.choices)
        if self.spec.pattern:
            out["pattern"] = self.spec.pattern
        return out


def option(default: Any, **spec: Any) -> Any:
    """A dataclass field that is an operator option (``Spec``'s keywords)."""
    return dataclasses.field(default=default, metadata={"option": Spec(**spec)})


@functools.cache
def option_fields(record: type) -> tuple[OptionField, ...]:
    """The option fields of a dataclass, in declaration order."""
    out = []
    for f in dataclasses.fields(record):
        spec = f.metadata.get("option")
        if spec is None:
            continue
        annotation = str(f.type).replace(" ", "")
        optional = annotation.endswith("|None")
        kind = str if spec.text is not None else _KINDS.get(annotation.removesuffix("|None"))
        if kind is None:
            raise TypeError(f"{record.__name__}.{f.name}: an option is an int, float, str or bool, not {f.type}")
        out.append(OptionField(f.name, kind, optional, f.default, spec))
    return tuple(out)


def number(kind: type, *, minimum: float | None = None, above: float | None = None, maximum: float | None = None,
           what: str = "") -> Callable[[str], Any]:
    """An argparse type: a finite number of ``kind`` within bounds, or a one-line error that says which bound."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"{text!r} must be greater than {above:g}{what}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum:g}{what}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {maximum:g}{what}")
        return value
    return parse


def _selected(record: type, names: Iterable[str] | None) -> list[OptionField]:
    fields = option_fields(record)
    if names is None:
        return list(fields)
    by_name = {f.name: f for f in fields}
    return [by_name[n] for n in names]


def add_arguments(parser: argparse.ArgumentParser, record: type, names: Iterable[str] | None = None, *,
                  prefix: str = "", required: Iterable[str] = ()) -> None:
    """Add ``record``'s options (``names``, default all) to ``parser``, each defaulting to None (left out: the
    record's default applies); ``prefix`` opens each help text; ``required`` options must be given."""
    must = set(required)
    for f in _selected(record, names):
        kwargs: dict[str, Any] = {"dest": f.name, "help": f.help(prefix), "required": f.name in must}
        if f.kind is bool:
            kwargs["action"] = "store_true"
        elif f.spec.choices:
            kwargs["choices"] = list(f.spec.choices)
        else:
            kwargs["metavar"] = f.spec.metavar or f.flag.lstrip("-").upper().replace("-", "_")
        if f.spec.repeat:
            kwargs["action"] = "append"
        if f.kind in (int, float) and f.spec.text is None and not f.spec.choices:
            kwargs["type"] = number(f.kind, minimum=f.spec.minimum, above=f.spec.above, maximum=f.spec.maximum,
                                    what=f.spec.unit)
        parser.add_argument(f.flag, **kwargs)


def given(record: type, values: Mapping[str, Any] | argparse.Namespace, names: Iterable[str] | None = None
          ) -> dict[str, Any]:
    """The options of ``record`` an operator gave (a Namespace from ``add_arguments``, or keywords by field name, where
    a name that is no option is a TypeError as for any function): text options parsed (a repeated one's list of
    texts; a value already parsed, a mapping say, is kept), those left out (None, or False for a flag) omitted so
    that the record's defaults apply."""
    source: Mapping[str, Any]
    if isinstance(values, argparse.Namespace):
        source = vars(values)
    else:
        source = values
        unknown = sorted(set(values) - {f.name for f in option_fields(record)})
        if unknown:
            raise TypeError(f"unexpected {record.__name__} option(s): {', '.join(unknown)}")
    out = {}
    for f in _selected(record, names):
        value = source.get(f.name)
        if value is None or value is False:
            continue
        text = isinstance(value, str) or (f.spec.repeat and isinstance(value, list))
        out[f.name] = f.spec.text(value) if f.spec.text is not None and text else value
    return out


def to_argv(record: type, values: Mapping[str, Any], names: Iterable[str] | None = None) -> list[str]:
    """The CLI arguments that give ``values`` (field name -> value as an operator writes it; None or False: left
    out), in declaration order; what ``add_arguments`` then reads back to the same values."""
    args: list[str] = []
    for f in _selected(record, names):
        value = values.get(f.name)
        if value is None or value is False:
            continue
        if value is True:
            args.append(f.flag)
        elif f.spec.repeat:
            texts = value if isinstance(value, list) else f.spec.unparse(value) if f.spec.unparse else [value]
            for text in texts:
                args += [f.flag, str(text)]
        else:
            args += [f.flag, repr(float(value)) if f.kind is float and f.spec.text is None else str(value)]
    return args
