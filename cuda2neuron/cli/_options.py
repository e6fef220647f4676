"""Options shared by migrate and check: rule selection and what rules emit."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from cuda2neuron.core import AMP_DTYPES, TARGETS, Config, ConfigError, parse_min_torch, parse_min_torch_neuronx
from cuda2neuron.workspace import ResultCache

from ._common import UsageError

__all__ = ["apply_file_overrides", "apply_overrides", "cache_options", "check_selection", "colour_option", "file_options",
           "RefreshingCache", "result_cache", "rule_options"]


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
    @click.option("--min-torch-neuronx", help="Oldest torch-neuronx the code must run on, e.g. 2.14.3.1 (accelerator target).")
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
    min_neuronx = opts.pop("min_torch_neuronx", None)
    try:
        parsed_neuronx = parse_min_torch_neuronx(min_neuronx, "--min-torch-neuronx") if min_neuronx else None
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if (parsed is None and not config.min_torch_given) or (parsed_neuronx is None and not config.min_torch_neuronx_given):
        # The oldest torch / torch-neuronx the project supports, as its own requirements declare it.
        found, found_neuronx = _min_torch_of_project(config, paths) if paths else (None, None)
        parsed = parsed if (parsed is not None or config.min_torch_given) else found
        parsed_neuronx = parsed_neuronx if (parsed_neuronx is not None or config.min_torch_neuronx_given) else found_neuronx
    select = _codes(opts.pop("select", None))
    ignore = _codes(opts.pop("ignore", None))
    check_selection(config, select, ignore)
    return config.with_overrides(
        select=select,
        ignore=ignore,
        unsafe_fixes=opts.pop("unsafe_fixes", None),
        target=opts.pop("target", None),
        amp_dtype=opts.pop("amp_dtype", None),
        min_torch=parsed,
        min_torch_neuronx=parsed_neuronx,
    )


def check_selection(config: Config, select: tuple[str, ...] | None, ignore: tuple[str, ...] | None) -> None:
    """Unknown codes are usage errors, never silently nothing: a typo must not turn CI green."""
    from cuda2neuron.kinds import known_codes, unknown_selectors

    for option, codes in (("--select", select), ("--ignore", ignore)):
        bad = unknown_selectors(codes or ())
        if bad:
            raise UsageError(f"{option}: unknown rule code(s) {', '.join(bad)} (`cuda2neuron rules` lists them)")
    where = f"{config.source}: [tool.cuda2neuron]"
    for key, codes in (("select", config.select), ("ignore", config.ignore)):
        bad = unknown_selectors(codes)
        if bad:
            raise UsageError(f"{where}.{key}: unknown rule code(s) {', '.join(bad)} (`cuda2neuron rules` lists them)")
    for pattern, codes in config.per_file_ignores:
        bad = unknown_selectors(codes)
        if bad:
            raise UsageError(
                f"{where}.per-file-ignores.{pattern!r}: unknown rule code(s) {', '.join(bad)} "
                "(`cuda2neuron rules` lists them)"
            )
    effective = config.with_overrides(select=select, ignore=ignore)
    if not any(effective.selects(code) for code in known_codes()):
        chosen = f"select {', '.join(effective.select)}" + (f", ignore {', '.join(effective.ignore)}" if effective.ignore else "")
        raise UsageError(f"no rule is selected ({chosen}): nothing would be checked")


def _min_torch_of_project(config: Config, paths: list[Path]) -> tuple[tuple[int, int] | None, tuple[int, ...] | None]:
    from cuda2neuron.documents.min_torch import min_torch_from_requirements, min_torch_neuronx_from_requirements

    root = Path(config.source).parent if config.source else None
    if root is None:
        first = paths[0]
        root = first if first.is_dir() else first.parent
    return min_torch_from_requirements(root), min_torch_neuronx_from_requirements(root)


# ---- which files a run reads, and how it prints: kept apart from the rule options ----

def _patterns(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(p.strip() for p in value.split(",") if p.strip())


def file_options(func):
    @click.option("--exclude", help="Leave out these paths (comma-separated gitignore-style patterns); replaces the "
                  "config's exclude (ruff).")
    @click.option("--extend-exclude", help="Leave out these paths too, on top of the config's exclude.")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def apply_file_overrides(config: Config, opts: dict) -> Config:
    """--exclude replaces the config's list, --extend-exclude adds to it (ruff). The patterns are
    read like the config's: relative to its folder (the path walked where there is no config)."""
    exclude = _patterns(opts.pop("exclude", None))
    extend = _patterns(opts.pop("extend_exclude", None)) or ()
    base = config.exclude if exclude is None else exclude
    return config.with_overrides(exclude=base + tuple(p for p in extend if p not in base))


def colour_option(func):
    @click.option("--color", "colour", type=click.Choice(("auto", "always", "never")), default="auto",
                  show_default=True, expose_value=False, is_eager=True, callback=_set_colour,
                  help="Colour the output for people: auto (a terminal, unless NO_COLOR is set), always, never.")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def _set_colour(ctx: click.Context, param: click.Parameter, value: str) -> str:  # noqa: ARG001 - click's signature
    from ._console import Console

    Console.colour = value
    return value


def cache_options(func):
    @click.option("--no-cache", is_flag=True, help="Neither read nor write the results cache (ruff's --no-cache).")
    @click.option("--refresh", is_flag=True, help="Process every file again and write the results to the cache "
                  "(after a cache you do not trust; --no-cache leaves it as it was).")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


class RefreshingCache(ResultCache):
    """--refresh: every lookup a miss, every result written (the cache as a fresh run leaves it).
    At module level: the worker processes receive the cache pickled."""

    def get(self, key: str, shown: str | None = None, data: bytes | None = None) -> None:  # noqa: ARG002
        return None


def result_cache(opts: dict) -> ResultCache | None:
    """The run's results cache from --no-cache / --refresh."""
    no_cache, refresh = opts.pop("no_cache", False), opts.pop("refresh", False)
    if no_cache and refresh:
        raise UsageError("--no-cache and --refresh exclude each other (--refresh writes the cache)")
    if no_cache:
        return None
    return RefreshingCache() if refresh else ResultCache()
