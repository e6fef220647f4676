"""The catalog's data tables: TOML files shipped next to the rules that read them.

One reader for all of them (the move table, the kernel packages, the RNG trackers, the library
probes), so the TOML parser is chosen in one place: ``tomllib`` from Python 3.11, the ``tomli``
backport before (pyproject pulls it there).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pyproject pulls tomli on 3.10
    import tomli as tomllib

__all__ = ["read_table", "tomllib"]


def read_table(path: Path) -> dict[str, Any]:
    """The parsed table at ``path`` (a file of the package: a read or parse error is a bug in the
    shipped catalog, raised as is)."""
    return tomllib.loads(path.read_text(encoding="utf-8"))
