"""The rule catalog as the kinds see it: loaded on first need, filtered by a run's config."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from importlib.util import find_spec

from cuda2neuron.core import Config, Rule, registered_rules

__all__ = ["catalog", "known_codes", "rules_for", "unknown_selectors"]

# One rule per module, named by its code (`device/cn101_cuda_method_call.py`): the catalog's
# file names say which codes exist without importing it (half a second of rule modules).
_RULE_FILE_RE = re.compile(r"^cn(\d{3})_[a-z0-9_]+\.py$")
_SELECTOR_RE = re.compile(r"^CN\d{0,3}$")


def catalog() -> dict[str, type[Rule]]:
    """Every registered rule by code, the catalog imported (it registers its rules on import)."""
    import cuda2neuron.rules  # noqa: F401

    return registered_rules()


def rules_for(config: Config, path: str | None = None) -> tuple[type[Rule], ...]:
    if not config.per_file_ignores:
        return _rules_for_every_file(config, len(registered_rules()))
    return tuple(
        rule
        for code, rule in catalog().items()
        if config.selects(code, path) and config.settings.target in rule.targets
    )


@lru_cache(maxsize=16)
def _rules_for_every_file(config: Config, registered: int) -> tuple[type[Rule], ...]:
    """A config without per-file ignores selects the same rules for every file: worked out once
    (diffusers: 0.5 s of selector matching over 1,500 files). ``registered`` keys the answer to
    the catalog it saw, so a rule defined later (a plugin, a test's) is not missed."""
    return tuple(rule for code, rule in catalog().items() if config.selects(code) and config.settings.target in rule.targets)


@lru_cache(maxsize=1)
def known_codes() -> frozenset[str]:
    """Every rule code of the catalog, read from its module names (a test compares them with
    the registered rules)."""
    spec = find_spec("cuda2neuron.rules")
    assert spec is not None and spec.submodule_search_locations is not None
    codes: set[str] = set()
    for location in spec.submodule_search_locations:
        for _folder, _dirs, names in os.walk(location):
            codes.update(f"CN{m.group(1)}" for n in names if (m := _RULE_FILE_RE.match(n)))
    return frozenset(codes)


def unknown_selectors(selectors) -> list[str]:  # noqa: ANN001 - any iterable of str
    """The selectors (codes or code prefixes such as ``CN1``) that name no rule of the catalog."""
    codes = known_codes() | frozenset(registered_rules())
    return [
        s for s in selectors if not (_SELECTOR_RE.match(s) and any(c.startswith(s) for c in codes))
    ]
