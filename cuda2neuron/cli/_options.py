"""Options shared by migrate and check: rule selection and what rules emit."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from cuda2neuron.core import AMP_DTYPES, TARGETS, Config, ConfigError, parse_min_torch

from ._common import UsageError

__all__ = ["apply_overrides", "rule_options"]


def _codes(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(c.strip().upper() for c in value.split(",") if c.strip())


def rule_options(func):
    @click.option("--select", help="Only rules whose code starts with one of these (comma-separated), e.g. CN1,CN301.")
    @click.option("--ignore", help="Skip rules whose code starts with one of these (comma-separated).")
    @click.option("--unsafe-fixes", is_flag=True, default=None, help="Also apply fixes that may change numerics or control flow.")
    @click.option("--target", type=click.Choice(TARGETS), help="neuron (default) or accelerator (code that runs on CUDA and Trainium).")
    @click.option("--amp-dtype", type=click.Choice(AMP_DTYPES), help="dtype emitted for autocast (default bfloat16).")
    @click.option("--min-torch", help="Oldest torch the code must run on, e.g. 2.7 (accelerator target).")
    @click.option("--config", "config_file", type=click.Path(path_type=Path), help="pyproject.toml to read [tool.cuda2neuron] from.")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def apply_overrides(config: Config, opts: dict, paths: list[Path] | None = None) -> Config:
    min_torch = opts.pop("min_torch", None)
    try:
        parsed = parse_min_torch(min_torch, "--min-torch") if min_torch else None
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if parsed is None and not config.min_torch_given and paths:
        # The oldest torch the project supports, as its own requirements declare it.
        parsed = _min_torch_of_project(config, paths)
    return config.with_overrides(
        select=_codes(opts.pop("select", None)),
        ignore=_codes(opts.pop("ignore", None)),
        unsafe_fixes=opts.pop("unsafe_fixes", None),
        target=opts.pop("target", None),
        amp_dtype=opts.pop("amp_dtype", None),
        min_torch=parsed,
    )


def _min_torch_of_project(config: Config, paths: list[Path]) -> tuple[int, int] | None:
    from cuda2neuron.documents.min_torch import min_torch_from_requirements

    root = Path(config.source).parent if config.source else None
    if root is None:
        first = paths[0]
        root = first if first.is_dir() else first.parent
    return min_torch_from_requirements(root)
