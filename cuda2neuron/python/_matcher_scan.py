"""libcst's import helpers without a scan of their methods per instance.

libcst's matcher-decoratable visitors (``AddImportsVisitor``, ``RemoveImportsVisitor`` and the
gatherers they build inside) look for methods marked by ``@m.visit``, ``@m.leave``,
``@m.call_if_inside`` or ``@m.call_if_not_inside`` on every new instance: three walks over
``dir()`` (about a thousand attributes: the ``visit_*``/``leave_*`` methods of every node type),
each with a ``getattr`` and a property check per name. A fix that adds an import builds two such
visitors, i.e. six walks: ~60% of the CPU of fixing a small file (five rules' examples under the
min-torch table: 2.4 s, of which 2.0 s in ``_fix_imports``).

What the walks find is the class's: the marks sit on functions, which live on the class. So
whether a class has any is decided once per class; one without (every helper the engine uses)
gets empty tables at once, and one with marks, or an instance that holds a marked function of
its own, is scanned by libcst as before. Installed only when the engine imports libcst's codemod
package (``install``); a libcst without these private functions is left alone (the scans stay,
and stay correct).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["install"]

# libcst's module-level scanners, each called by a matcher visitor's __init__ or _matchers.
_SCANNERS = ("_gather_constructed_visit_funcs", "_gather_constructed_leave_funcs", "_gather_matchers")
# The attributes libcst's decorators set on a function (libcst.matchers._visitors).
_MARKS = ("CONSTRUCTED_VISIT_MATCHER_ATTR", "CONSTRUCTED_LEAVE_MATCHER_ATTR",
          "VISIT_POSITIVE_MATCHER_ATTR", "VISIT_NEGATIVE_MATCHER_ATTR")

_installed = False


def _marked(value: object, marks: tuple[str, ...]) -> bool:
    return any(getattr(value, mark, None) for mark in marks)


def _class_is_unmarked(cls: type, marks: tuple[str, ...]) -> bool:
    # On the class, a property is the property object itself (no getter runs), as libcst's own
    # scan skips properties; a classmethod or staticmethod reads as its function, marks and all.
    return not any(_marked(getattr(cls, name, None), marks) for name in dir(cls))


def _memoised(scan: Callable[[Any], dict], marks: tuple[str, ...],
              unmarked: weakref.WeakKeyDictionary) -> Callable[[Any], dict]:
    def scan_once_per_class(obj: Any) -> dict:
        cls = type(obj)
        known = unmarked.get(cls)
        if known is None:
            known = unmarked[cls] = _class_is_unmarked(cls, marks)
        # Trap: dir() of an instance lists its own attributes too; a marked function stored on
        # the instance is one the class cannot vouch for.
        if known and not any(_marked(v, marks) for v in getattr(obj, "__dict__", {}).values()):
            return {}
        return scan(obj)

    scan_once_per_class.__wrapped__ = scan  # type: ignore[attr-defined]
    return scan_once_per_class


def install() -> None:
    """Make libcst's matcher visitors decide once per class whether they have marked methods."""
    global _installed
    if _installed:
        return
    from libcst.matchers import _visitors

    marks = tuple(getattr(_visitors, name, None) for name in _MARKS)
    if not all(isinstance(m, str) for m in marks) or not all(callable(getattr(_visitors, s, None)) for s in _SCANNERS):
        _installed = True  # another libcst: its own scans stay
        return
    unmarked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    for name in _SCANNERS:
        setattr(_visitors, name, _memoised(getattr(_visitors, name), marks, unmarked))  # type: ignore[arg-type]
    _installed = True
