"""The rule catalog as the kinds see it: loaded on first need, filtered by a run's config."""

from __future__ import annotations

from cuda2neuron.core import Config, Rule, registered_rules

__all__ = ["catalog", "rules_for"]


def catalog() -> dict[str, type[Rule]]:
    """Every registered rule by code, the catalog imported (it registers its rules on import)."""
    import cuda2neuron.rules  # noqa: F401

    return registered_rules()


def rules_for(config: Config, path: str | None = None) -> tuple[type[Rule], ...]:
    return tuple(
        rule
        for code, rule in catalog().items()
        if config.selects(code, path) and config.settings.target in rule.targets
    )
