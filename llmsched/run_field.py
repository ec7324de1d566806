"""A run field's one declaration: type, default, range, help, CLI flag and vLLM engine argument, in one place.

A dataclass field declared with ``declare(...)`` (or a shared ``RunField``'s ``.field()``) carries its
``RunField`` in its metadata, in the style of Vidur's config dataclasses (``field(metadata={"help": ...})``).
The command line's options, the config files' keys, the checks and their error messages, and the vLLM engine's
arguments are all generated from these declarations, so a field is written once however many places take it.

It sits with the mechanism layer, which declares a replica's limits with it (``engine/limits.py``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a table of KEY = VALUE"}


@dataclass(frozen=True)
class RunField:
    """What one field is and accepts. ``kind`` is int, float, str, bool or dict (a table of parameters);
    ``optional`` allows None (left out); ``flag`` is its command-line option (default ``--name-with-dashes``);
    a ``switch`` flag takes no value and sets the field to the opposite of its default; ``vllm`` names the vLLM
    engine argument the field is (``to_vllm`` converts the value where the units differ)."""

    default: object
    help: str
    kind: type | None = None
    optional: bool = False
    low: float | None = None     # inclusive
    above: float | None = None   # exclusive lower bound
    high: float | None = None    # inclusive
    choices: tuple = ()
    hint: str = ""               # said after the expectation in an error
    must: str = ""               # the whole expectation, where the generated one would read badly
    parse: Callable | None = None  # a str field's parser (ValueError on bad text): its result is kept (Parsed)
    flag: str | None = None
    switch: bool = False
    metavar: str | None = None
    vllm: str | None = None
    to_vllm: Callable | None = None

    def __post_init__(self):
        if self.kind is None:
            if self.default is None:
                raise TypeError(f"RunField({self.help!r}): a None default needs kind=")
            object.__setattr__(self, "kind", type(self.default))
        if self.kind not in KINDS:
            raise TypeError(f"RunField({self.help!r}): kind must be one of int, float, str, bool, dict")

    def field(self, **changes) -> dataclasses.Field:
        """A dataclass field with this declaration (``changes``: e.g. another default, with its reason said
        where it is given)."""
        spec = dataclasses.replace(self, **changes) if changes else self
        if spec.kind is dict:
            return dataclasses.field(default_factory=dict, metadata={"run_field": spec})
        return dataclasses.field(default=spec.default, metadata={"run_field": spec})

    def flag_of(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")

    def expectation(self) -> str:
        if self.must:
            return self.must
        what = "one of " + ", ".join(self.choices) if self.choices else KINDS[self.kind]
        if self.kind is str and not self.optional and not self.choices:
            what = "a non-empty string"
        bounds = []
        if self.above is not None:
            bounds.append(f"> {self.above:g}")
        if self.low is not None:
            bounds.append(f">= {self.low:g}")
        if self.high is not None:
            bounds.append(f"<= {self.high:g}")
        text = what + (" " + " and ".join(bounds) if bounds else "")
        if self.optional:
            text += " (or leave it out)"
        return text + (f"; {self.hint}" if self.hint else "")

    def check(self, name: str, value, origin: "Origin"):
        """``value`` as the field's type (an int stays an int; a whole float for an int field is refused), a
        parsed text as ``Parsed``; else a ValueError naming the field as ``origin`` wrote it."""
        if value is None:
            if self.optional:
                return None
            raise ValueError(f"{origin.at(name, value)}: must be {self.expectation()}")
        typed = self._typed(value)
        if typed is _WRONG or not self._in_range(typed):
            raise ValueError(f"{origin.at(name, value)}: must be {self.expectation()}")
        if self.parse and typed and not (isinstance(typed, Parsed) and typed.parser is self.parse):
            try:
                typed = Parsed(typed, self.parse(typed), self.parse)
            except ValueError as e:
                raise ValueError(f"{origin.at(name, value)}: {e}") from None
        return typed

    def _typed(self, value):
        kind = self.kind
        if kind is bool:
            return value if isinstance(value, (bool, np.bool_)) else _WRONG
        if kind is str:
            return value if isinstance(value, str) and (value.strip() or self.optional) else _WRONG
        if kind is dict:
            return dict(value) if isinstance(value, dict) else _WRONG
        if isinstance(value, (bool, np.bool_)):
            return _WRONG
        if kind is int:
            return int(value) if isinstance(value, (int, np.integer)) else _WRONG
        if isinstance(value, (int, float, np.integer, np.floating)):
            value = float(value)
            return value if math.isfinite(value) else _WRONG
        return _WRONG

    def _in_range(self, value) -> bool:
        if self.choices and value not in self.choices:
            return False
        if self.kind not in (int, float):
            return True
        if self.low is not None and value < self.low:
            return False
        if self.above is not None and value <= self.above:
            return False
        return self.high is None or value <= self.high


_WRONG = object()


def declare(default, help: str, **spec) -> dataclasses.Field:
    """A dataclass field declared here and nowhere else (see ``RunField`` for ``spec``)."""
    return RunField(default, help, **spec).field()


def declare_parsed(help: str, parse: Callable, **spec) -> dataclasses.Field:
    """An optional text field (None: left out) that ``parse`` reads when given: a file or a spec in a small
    language (see ``RunField`` for ``spec``)."""
    return declare(None, help, kind=str, optional=True, parse=parse, **spec)


def declared(cls) -> dict[str, RunField]:
    """The declared fields of a dataclass (class or instance), in field order."""
    return {f.name: f.metadata["run_field"] for f in dataclasses.fields(cls) if "run_field" in f.metadata}


def default_of(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


class Parsed(str):
    """A field's text as written (what config dumps, meta.json and summaries show) with its parsed ``value``,
    so a text is parsed once however often the config is copied or checked."""

    def __new__(cls, text: str, value, parser: Callable):
        self = super().__new__(cls, text)
        self.value = value
        self.parser = parser
        return self

    def __reduce__(self):
        return Parsed, (str(self), self.value, self.parser)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class Origin:
    """Where values were written, for error messages: the command line (``flags``: each field's option), a
    config file, or Python code."""

    def __init__(self, kind: str = "api", path: str | Path | None = None, text: str | None = None,
                 flags: dict[str, str] | None = None, table: str | None = None):
        self.kind = kind
        self.path = path
        self.text = text
        self.flags = flags or {}
        self.table = table  # the fields of one table (a pool's: --decode-pool KEY=VALUE, a file's [decode_pool])

    @classmethod
    def file(cls, path, text: str | None = None) -> "Origin":
        return cls("file", path, text)

    def in_table(self, table: str) -> "Origin":
        """Where the fields of ``table`` (one of this origin's fields) were written."""
        return Origin(self.kind, self.path, self.text, self.flags, table)

    def name(self, key: str) -> str:
        """How the user wrote the field's name."""
        if self.table:
            return f"{Origin(self.kind, self.path, flags=self.flags).name(self.table)} {key}" if self.kind == "cli" \
                else f"{self.table}.{key}" + (f" (in {self.path})" if self.kind == "file" else "")
        if self.kind == "cli":
            return self.flags.get(key, "--" + key.replace("_", "-"))
        if self.kind == "file":
            return f"{key} (in {self.path})"
        return key

    def at(self, key: str, value) -> str:
        """The field and its value as the user wrote them."""
        if self.table:
            return f"{self.name(key)}={shown(value)}" if self.kind == "cli" else \
                f"{self.path}: {self.table}.{key} = {shown(value)}" if self.kind == "file" else \
                f"{self.table}.{key}={value!r}"
        if self.kind == "cli":  # a blank value quoted, so that it shows
            return f"{self.name(key)} {value!r}" if isinstance(value, str) and not value.strip() else \
                f"{self.name(key)} {value}"
        if self.kind == "file":
            return f"{self.path}{self.line_of(key)}: {key} = {shown(value)}"
        return f"{key}={value!r}"

    def line_of(self, key: str) -> str:
        """':N' for the line of a file that sets ``key`` (found by its text), else ''."""
        if not self.text:
            return ""
        pattern = re.compile(r"^\s*['\"]?" + "[-_]".join(map(re.escape, key.split("_"))) + r"['\"]?\s*[=:]")
        for i, line in enumerate(self.text.splitlines(), 1):
            if pattern.match(line):
                return f":{i}"
        return ""


API = Origin()


def shown(value) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
