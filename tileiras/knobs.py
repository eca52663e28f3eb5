"""Every environment variable tileiras reads, as typed descriptors.

Nothing else in the package calls ``os.environ``: read ``knobs.debug`` (etc.) instead.
Each knob is read when accessed, so tests can ``monkeypatch.setenv`` freely.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

T = TypeVar("T")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


@dataclass(frozen=True)
class _EnvKnob(Generic[T]):
    name: str
    default: T
    help: str = ""

    def __get__(self, obj: object, objtype: Optional[type] = None) -> T:
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        return self.parse(raw)

    def parse(self, raw: str) -> T:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True)
class _BoolKnob(_EnvKnob[bool]):
    def parse(self, raw: str) -> bool:
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        return self.default


@dataclass(frozen=True)
class _PathKnob(_EnvKnob[Optional[str]]):
    def parse(self, raw: str) -> Optional[str]:
        return raw or None


class _Knobs:
    """Namespace of knobs; use the module-level ``knobs`` instance."""

    debug = _BoolKnob("TILEIRAS_DEBUG", False,
                      "show Python tracebacks for internal errors instead of one error line")
    cuda_home = _PathKnob("CUDA_HOME", None, "CUDA toolkit root (its bin/ is searched for tools)")
    cuda_path = _PathKnob("CUDA_PATH", None, "alternative spelling of CUDA_HOME")
    path = _PathKnob("PATH", None, "executable search path")


knobs = _Knobs()
