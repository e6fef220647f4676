"""`[tool.cuda2neuron.validate]` in the project's pyproject.toml: entry, steps, tolerances."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ConfigError", "load_project_config"]

_KEYS = {"entry", "script", "args", "steps", "timeout", "seed", "tolerances"}


class ConfigError(Exception):
    pass


def load_project_config(tree: Path) -> dict[str, Any]:
    """The validate table of `tree`/pyproject.toml (walking up to the filesystem root), or {}."""
    for folder in (tree, *tree.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
            table = data.get("tool", {}).get("cuda2neuron", {}).get("validate", {})
            if not isinstance(table, dict):
                raise ConfigError(f"{path}: [tool.cuda2neuron.validate] must be a table")
            unknown = set(table) - _KEYS
            if unknown:
                raise ConfigError(f"{path}: unknown key(s) in [tool.cuda2neuron.validate]: {', '.join(sorted(unknown))}")
            tol = table.get("tolerances", {})
            if not isinstance(tol, dict) or not all(isinstance(v, (int, float)) for v in tol.values()):
                raise ConfigError(f"{path}: [tool.cuda2neuron.validate.tolerances] must map names to numbers")
            if "steps" in table and (not isinstance(table["steps"], int) or table["steps"] < 1):
                raise ConfigError(f"{path}: steps must be a positive integer")
            return dict(table)
    return {}
