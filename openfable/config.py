"""Typed readers for ``OPENFABLE_*`` environment variables.

Settings must import even when a value is wrong, so that Django's system checks can
report *every* bad variable at once with its fix (``openfable.checks``) instead of the
first one crashing the import with a traceback. Each reader returns the default for a
bad value and records a ``ConfigProblem``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import environ

PREFIX = "OPENFABLE_"
T = TypeVar("T")


@dataclass(frozen=True)
class ConfigProblem:
    variable: str
    message: str
    hint: str


@dataclass
class EnvReader:
    env: environ.Env = field(default_factory=environ.Env)
    problems: list[ConfigProblem] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.env.prefix = PREFIX

    def is_set(self, name: str) -> bool:
        return (PREFIX + name) in self.env.ENVIRON

    def raw(self, name: str) -> str | None:
        return self.env.ENVIRON.get(PREFIX + name)

    def string(self, name: str, default: str = "") -> str:
        return str(self.env.str(name, default=default))

    def _parse(self, name: str, default: T, parse: Callable[[str], T], expected: str, hint: str) -> T:
        raw = self.raw(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            return parse(raw.strip())
        except ValueError:
            self.problems.append(
                ConfigProblem(PREFIX + name, f"{PREFIX + name}={raw!r} is not {expected}.", hint)
            )
            return default

    def integer(
        self, name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        bounds = _bounds_text(minimum, maximum)
        hint = f"Set {PREFIX + name} to a whole number{bounds}, or unset it to use {default}."
        value = self._parse(name, default, int, "an integer", hint)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            self.problems.append(
                ConfigProblem(PREFIX + name, f"{PREFIX + name}={value} is out of range.", hint)
            )
            return default
        return value

    def number(
        self, name: str, default: float, *, minimum: float | None = None, maximum: float | None = None
    ) -> float:
        bounds = _bounds_text(minimum, maximum)
        hint = f"Set {PREFIX + name} to a number{bounds}, or unset it to use {default:g}."
        value = self._parse(name, default, float, "a number", hint)
        problem = ""
        if not math.isfinite(value):
            problem = "is not a finite number"
        elif minimum is not None and value < minimum:
            problem = f"is below {minimum}"
        elif maximum is not None and value > maximum:
            problem = f"is above {maximum}"
        if problem:
            self.problems.append(ConfigProblem(PREFIX + name, f"{PREFIX + name}={value} {problem}.", hint))
            return default
        return value

    def boolean(self, name: str, default: bool) -> bool:
        hint = f"Set {PREFIX + name} to true or false, or unset it to use {str(default).lower()}."
        return self._parse(name, default, _parse_bool, "true or false", hint)

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        hint = f"Set {PREFIX + name} to one of {', '.join(choices)}, or unset it to use {default}."

        def parse(raw: str) -> str:
            if raw.lower() not in choices:
                raise ValueError(raw)
            return raw.lower()

        return self._parse(name, default, parse, f"one of {', '.join(choices)}", hint)

    def strings(self, name: str, default: list[str]) -> list[str]:
        raw = self.raw(name)
        if raw is None or raw.strip() == "":
            return default
        return [item.strip() for item in raw.split(",") if item.strip()]


def _bounds_text(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f" between {minimum} and {maximum}"
    if minimum is not None:
        return f" of at least {minimum}"
    return ""


def _parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)
