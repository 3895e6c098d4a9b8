"""Enums for configuration that people also type as text (CLI flags, env keyword arguments)."""

from __future__ import annotations

import enum
from typing import TypeVar

E = TypeVar("E", bound="Choice")


class Choice(enum.Enum):
    """An enum whose values are the words people type; :meth:`parse` accepts either.

    Subclasses set ``__label__`` (what the value means, for error messages), e.g. "joint mode".
    """

    @classmethod
    def parse(cls: type[E], value: "str | E") -> E:
        """The member for ``value`` (a member, or its text in any case); ValueError naming the choices."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            label = getattr(cls, "__label__", cls.__name__)
            raise ValueError(f"unknown {label} {value!r}; choose one of: {', '.join(m.value for m in cls)}") from None
