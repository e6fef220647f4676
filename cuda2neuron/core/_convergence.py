"""The fixed-point contract shared by the Python engine and the text handlers.

Kept apart from ``_lint`` (which imports libcst) so that ``guarded`` and the text handlers can
name it without loading the parser.
"""

from __future__ import annotations

__all__ = ["MAX_ITERATIONS", "ConvergenceError"]

# A fix built from an original node can hide an inner fix, so we re-lint after applying.
# Reaching the cap means two rules fight: a bug, not a result.
MAX_ITERATIONS = 10


class ConvergenceError(RuntimeError):
    pass
