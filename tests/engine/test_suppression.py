"""Suppression comments silence findings and keep their fixes from being applied."""

from __future__ import annotations

import pytest

from cuda2neuron.workspace import fix_source, lint_source

CASES = [
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN101]\n", 0, id="exact-code"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN1]\n", 0, id="prefix"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore\n", 0, id="bare"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN2]\n", 1, id="other-code"),
    pytest.param("x = f(\n    y.cuda(),  # cuda2neuron: ignore[CN101]\n)\n", 0, id="multi-line-call"),
    pytest.param("x = y.cuda()\nz = w.cuda()  # cuda2neuron: ignore\n", 1, id="only-its-line"),
]


@pytest.mark.parametrize(("source", "count"), CASES)
def test_suppressed_findings_and_fixes(source, count):
    assert len(lint_source(source)) == count
    fixed, findings = fix_source(source)
    assert sum(1 for f in findings if f.applied) == count
    assert fixed.count(".cuda()") == source.count(".cuda()") - count
