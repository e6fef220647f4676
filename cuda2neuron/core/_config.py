"""`[tool.cuda2neuron]` configuration: read, validated, merged with command-line options.

A bad key or value is a ``ConfigError`` naming the file and the key: a typo must never silently
disable a rule.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._settings import AMP_DTYPES, TARGETS, Settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["CONFIG_NAMES", "Config", "ConfigError", "relative_to_config", "config_from_table", "find_config", "find_pyproject",
           "load_config", "load_validate_table", "parse_min_torch",
           "parse_min_torch_neuronx"]


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("CN",)
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    settings: Settings = field(default_factory=Settings)
    # Where the config came from (for messages), or "" for defaults.
    source: str = ""
    # The `[tool.cuda2neuron.validate]` table, passed through untouched for `validate`.
    validate: tuple[tuple[str, Any], ...] = ()
    # Whether min-torch was given (config or command line) rather than defaulted: otherwise the
    # CLI may read it from the project's requirements.
    min_torch_given: bool = False
    min_torch_neuronx_given: bool = False  # the same for min-torch-neuronx

    def selects(self, code: str, path: str | None = None) -> bool:
        if not any(code.startswith(p) for p in self.select):
            return False
        if any(code.startswith(p) for p in self.ignore):
            # A more specific select beats a broader ignore (ruff's rule): CN1 ignored, CN101 selected.
            best_select = max((len(p) for p in self.select if code.startswith(p)), default=-1)
            best_ignore = max(len(p) for p in self.ignore if code.startswith(p))
            if best_ignore >= best_select:
                return False
        if path is not None and self.per_file_ignores:
            rel = relative_to_config(path, self.source)
            for pattern, codes in self.per_file_ignores:
                if _path_matches(rel, pattern) and any(code.startswith(c) for c in codes):
                    return False
        return True

    @property
    def root(self) -> Path | None:
        """The folder of the config file: what `exclude` and `per-file-ignores` are relative to."""
        return Path(self.source).parent if self.source else None

    def with_overrides(self, **overrides: Any) -> Config:
        settings_keys = {"target", "amp_dtype", "min_torch", "min_torch_neuronx", "project"}
        s = {k: v for k, v in overrides.items() if k in settings_keys and v is not None}
        c = {k: v for k, v in overrides.items() if k not in settings_keys and v is not None}
        out = replace(self, **c)
        if s:
            out = replace(out, settings=replace(out.settings, **s))
        return out


def relative_to_config(path: str, source: str) -> str:
    """``path`` (as shown: relative to the working folder, or absolute) relative to the folder of
    the config file ``source``, with forward slashes; as given when it lies outside that folder.

    ruff's convention: a pattern means the same wherever the command runs from (a path as
    typed would make `scripts/*` match from the project root only).
    """
    return _relative(path, source, os.getcwd())


@lru_cache(maxsize=4096)
def _relative(path: str, source: str, cwd: str) -> str:
    shown = path.replace("\\", "/")
    if not source:
        return shown
    root = os.path.dirname(os.path.join(cwd, source))
    full = os.path.normpath(os.path.join(cwd, path))
    if not full.startswith(root.rstrip(os.sep) + os.sep):
        return shown
    return os.path.relpath(full, root).replace("\\", "/")


def _path_matches(path: str, pattern: str) -> bool:
    folder = pattern.rstrip("/")
    if "/" in folder:
        # A pattern with a folder in it is anchored at the config's folder (`scripts/*.py`).
        folder = folder.lstrip("/")
        return fnmatch.fnmatch(path, folder) or fnmatch.fnmatch(path, folder + "/*")
    # A bare name (`test_*.py`, `scripts`) matches a file or a folder at any depth.
    parts = path.split("/")
    return any(fnmatch.fnmatch(part, folder) for part in parts)


_KEYS = {
    "select",
    "extend-select",
    "ignore",
    "extend-ignore",
    "exclude",
    "extend-exclude",
    "unsafe-fixes",
    "amp-dtype",
    "target",
    "min-torch",
    "min-torch-neuronx",
    "per-file-ignores",
    "validate",
}


# The files a folder's configuration is read from, the first that exists wins (ruff: ruff.toml
# over pyproject.toml): cuda2neuron.toml holds the keys of [tool.cuda2neuron] at its top level.
CONFIG_NAMES = ("cuda2neuron.toml", "pyproject.toml")


def find_config(start: Path) -> Path | None:
    """The configuration file that governs ``start``: in the nearest folder (``start`` or above)
    that has one, cuda2neuron.toml, else pyproject.toml."""
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else list(start.parents):
        for name in CONFIG_NAMES:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    return None


# validate's callers ask by the older name; a cuda2neuron.toml governs them too.
find_pyproject = find_config


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    # A bare string is refused, not read as a list of one: `select = "CN1, CN2"` would select
    # the prefix "CN1, CN2", which no code starts with — every rule silently off.
    if isinstance(value, str):
        raise ConfigError(f"{where}: expected a list of strings, got the string {value!r} (write [{value!r}], "
                          "one item per entry)")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def parse_min_torch(value: str, where: str = "min-torch") -> tuple[int, int]:
    # A string only: TOML reads `min-torch = 2.10` as the float 2.1, which would quietly mean
    # torch 2.1 — nine releases off.
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a version string like \"2.6\" (quoted), got {value!r}")
    parts = value.strip().split(".")
    try:
        major, minor = (int(p) for p in parts[:2])
    except ValueError:
        raise ConfigError(f"{where}: expected a version like '2.6', got {value!r}") from None
    if major < 0 or minor < 0:
        raise ConfigError(f"{where}: expected a version like '2.6', got {value!r}")
    return (major, minor)


def parse_min_torch_neuronx(value: str, where: str = "min-torch-neuronx") -> tuple[int, ...]:
    """``"2.14.3.1"`` -> (2, 14, 3, 1): a torch-neuronx release, quoted (TOML reads 2.14 as a float)."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a torch-neuronx version string like \"2.14.3.1\" (quoted), got {value!r}")
    parts = value.strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        raise ConfigError(f"{where}: expected a torch-neuronx version like '2.14.3.1', got {value!r}")
    return tuple(int(p) for p in parts)


def _standalone(source: str) -> bool:
    """A file whose keys are top-level (cuda2neuron.toml, or any --config file not named
    pyproject.toml, as ruff reads ruff.toml)."""
    return bool(source) and Path(source).name != "pyproject.toml"


def config_from_table(table: Mapping[str, Any], source: str) -> Config:
    # cuda2neuron.toml's keys are top-level: a message names the file alone.
    where = source if _standalone(source) else f"{source}: [tool.cuda2neuron]"
    unknown = sorted(set(table) - _KEYS)
    if unknown == ["tool"] and _standalone(source):
        raise ConfigError(f"{where}: a file not named pyproject.toml holds the keys of [tool.cuda2neuron] at its "
                          "top level (as cuda2neuron.toml does), not under [tool.cuda2neuron]")
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    cfg = Config(source=source)
    kw: dict[str, Any] = {}
    # `extend-*` adds to the list (the default's, or the same table's `select`/...), as in ruff;
    # a command-line --select / --ignore / --exclude replaces the whole list.
    for key, attr in (("select", "select"), ("ignore", "ignore"), ("exclude", "exclude")):
        base = _str_list(table[key], f"{where}.{key}") if key in table else getattr(cfg, attr)
        more = _str_list(table[f"extend-{key}"], f"{where}.extend-{key}") if f"extend-{key}" in table else ()
        if key in table or more:
            kw[attr] = base + tuple(m for m in more if m not in base)
    if "unsafe-fixes" in table:
        if not isinstance(table["unsafe-fixes"], bool):
            raise ConfigError(f"{where}.unsafe-fixes: expected true or false")
        kw["unsafe_fixes"] = table["unsafe-fixes"]
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}.per-file-ignores: expected a table of glob = [codes]")
        kw["per_file_ignores"] = tuple(
            (glob, _str_list(codes, f"{where}.per-file-ignores.{glob!r}")) for glob, codes in pfi.items()
        )
    if "validate" in table:
        kw["validate"] = tuple(sorted(_validate_table(table["validate"], source).items()))
    settings: dict[str, Any] = {}
    if "amp-dtype" in table:
        if table["amp-dtype"] not in AMP_DTYPES:
            raise ConfigError(f"{where}.amp-dtype: expected one of {', '.join(AMP_DTYPES)}")
        settings["amp_dtype"] = table["amp-dtype"]
    if "target" in table:
        if table["target"] not in TARGETS:
            raise ConfigError(f"{where}.target: expected one of {', '.join(TARGETS)}")
        settings["target"] = table["target"]
    if "min-torch" in table:
        settings["min_torch"] = parse_min_torch(table["min-torch"], f"{where}.min-torch")
        kw["min_torch_given"] = True
    if "min-torch-neuronx" in table:
        settings["min_torch_neuronx"] = parse_min_torch_neuronx(table["min-torch-neuronx"], f"{where}.min-torch-neuronx")
        kw["min_torch_neuronx_given"] = True
    cfg = replace(cfg, **kw)
    if settings:
        cfg = replace(cfg, settings=replace(cfg.settings, **settings))
    return cfg


# `[tool.cuda2neuron.validate]`: what validate runs and how it judges (docs/validate.md).
_VALIDATE_KEYS = {"entry", "script", "args", "steps", "timeout", "seed", "tolerances", "nproc", "fail_on", "logic", "logic_steps",
                  "max_memory_mb", "max_output_mb"}


def _validate_table(table: Any, source: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.cuda2neuron.validate] must be a table")
    unknown = set(table) - _VALIDATE_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) in [tool.cuda2neuron.validate]: {', '.join(sorted(unknown))}")
    where = f"{source}: [tool.cuda2neuron.validate]"
    tol = table.get("tolerances", {})
    if not isinstance(tol, dict) or not all(_is_number(v) for v in tol.values()):
        raise ConfigError(f"{source}: [tool.cuda2neuron.validate.tolerances] must map names to numbers")
    if "steps" in table and (type(table["steps"]) is not int or table["steps"] < 1):
        raise ConfigError(f"{source}: steps must be a positive integer")
    for key in ("entry", "script"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{where}.{key}: expected a string, got {table[key]!r}")
    if "args" in table:
        _str_list(table["args"], f"{where}.args")
    if "timeout" in table and (not _is_number(table["timeout"]) or not table["timeout"] > 0):
        raise ConfigError(f"{where}.timeout: expected a positive number of seconds, got {table['timeout']!r}")
    for key in ("max_memory_mb", "max_output_mb"):
        if key in table and (not _is_number(table[key]) or not table[key] > 0):
            raise ConfigError(f"{where}.{key}: expected a positive number of MiB, got {table[key]!r}")
    if "seed" in table and type(table["seed"]) is not int:
        raise ConfigError(f"{where}.seed: expected a whole number, got {table['seed']!r}")
    return dict(table)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)  # not bool: `true` is no tolerance


def load_validate_table(tree: Path) -> dict[str, Any]:
    """The validate table of the pyproject.toml that governs ``tree`` (walking up), or {}."""
    return dict(load_config(find_pyproject(tree)).validate)


def load_config(pyproject: Path | None) -> Config:
    if pyproject is None:
        return Config()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: invalid TOML: {exc}") from None
    table = data if _standalone(str(pyproject)) else data.get("tool", {}).get("cuda2neuron")
    if table is None:
        return Config(source=str(pyproject))
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.cuda2neuron] must be a table")
    return config_from_table(table, str(pyproject))
