"""Helpers private to the CN7xx family (rules for files that are not Python)."""

from __future__ import annotations

from cuda2neuron.core import Rule

__all__ = ["TextRule"]


class TextRule(Rule):
    """Base of rules run by a file handler instead of the libcst dispatcher.

    Subclasses set ``file_kinds`` and implement ``check_text(doc, settings)``, returning
    ``cuda2neuron.core.TextReport``s with offsets into ``doc.text``.
    """

    abstract = True

    @classmethod
    def check_text(cls, doc, settings):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError
