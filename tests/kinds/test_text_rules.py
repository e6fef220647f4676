"""The text-rule runner: suppressions, overlapping fixes wait a round, non-convergence fails."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Safety, Settings
from cuda2neuron.core import ConvergenceError
from cuda2neuron.core import TextReport, run_text_rules


class _Doc:
    def __init__(self, text: str) -> None:
        self.text = text


class _Upper:
    """Stand-in rule (not registered): upper-cases `hello`."""

    code, name = "CN790", "upper"

    @classmethod
    def check_text(cls, doc, settings):
        i = doc.text.find("hello")
        return [] if i < 0 else [TextReport(i, i + 5, "hello", replacement="HELLO")]


class _World:
    """Stand-in rule whose span overlaps _Upper's: rewrites `o world` to `o WORLD`."""

    code, name = "CN791", "world"

    @classmethod
    def check_text(cls, doc, settings):
        i = doc.text.find("world")
        return [] if i < 0 else [TextReport(i - 2, i + 5, "world", replacement=doc.text[i - 2 : i] + "WORLD")]


class _Grow:
    code, name = "CN792", "grow"

    @classmethod
    def check_text(cls, doc, settings):
        return [TextReport(0, 1, "grow", replacement="xx")]


def test_overlapping_fix_is_applied_in_the_next_round():
    new, items = run_text_rules("hello world\n", [_Upper, _World], _Doc, Settings(), fix=True, unsafe=False)
    assert new == "HELLO WORLD\n"
    assert [(it.rule.code, it.applied) for it in items] == [("CN790", True), ("CN791", True)]


def test_lint_only_reports_both():
    new, items = run_text_rules("hello world\n", [_Upper, _World], _Doc, Settings(), fix=False, unsafe=False)
    assert new is None and [it.rule.code for it in items] == ["CN790", "CN791"]
    assert [it.start for it in items] == [(1, 0), (1, 4)]


def test_suppression_comment():
    text = "hello world  # cuda2neuron: ignore[CN790]\n"
    new, items = run_text_rules(text, [_Upper], _Doc, Settings(), fix=True, unsafe=False)
    assert new is None and items == []


def test_fixes_that_never_settle_fail_instead_of_looping():
    with pytest.raises(ConvergenceError):
        run_text_rules("x\n", [_Grow], _Doc, Settings(), fix=True, unsafe=False)


def test_unsafe_fix_needs_opt_in():
    class _Unsafe(_Upper):
        @classmethod
        def check_text(cls, doc, settings):
            return [TextReport(0, 5, "hello", replacement="HELLO", safety=Safety.UNSAFE)] if "hello" in doc.text else []

    assert run_text_rules("hello\n", [_Unsafe], _Doc, Settings(), fix=True, unsafe=False)[0] is None
    assert run_text_rules("hello\n", [_Unsafe], _Doc, Settings(), fix=True, unsafe=True)[0] == "HELLO\n"
