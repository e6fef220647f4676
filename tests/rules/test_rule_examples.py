"""Every rule's VALID/INVALID examples become tests (Fixit style), with readable ids.

For an INVALID example with an expected output we also check that the output parses and that
fixing it again changes nothing (idempotence).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Invalid, Settings, Valid
from cuda2neuron.kinds import catalog
from cuda2neuron.workspace import fix_source, lint_source


def _config(code: str, target: str, options, unsafe: bool = False) -> Config:
    settings = replace(Settings(target=target), **dict(options))
    return Config(select=(code,), unsafe_fixes=unsafe, settings=settings)


def _cases(kind: str, unsafe_only: bool = False):
    for code, rule in catalog().items():
        examples = rule.VALID if kind == "valid" else rule.INVALID
        for i, ex in enumerate(examples):
            if unsafe_only and not (isinstance(ex, Invalid) and ex.unsafe and ex.expected):
                continue
            yield pytest.param(code, ex, id=f"{code}-{rule.name}-{kind}-{i}")


@pytest.mark.parametrize(("code", "example"), list(_cases("valid")))
def test_valid_example_is_not_reported(code, example):
    ex = example if isinstance(example, Valid) else Valid(example)
    findings = lint_source(ex.source, ex.path, _config(code, ex.target, ex.options))
    assert [f for f in findings if f.code == code] == []


@pytest.mark.parametrize(("code", "example"), list(_cases("invalid")))
def test_invalid_example_is_reported_and_fixed(code, example):
    ex = example if isinstance(example, Invalid) else Invalid(example)
    config = _config(code, ex.target, ex.options, unsafe=ex.unsafe)
    findings = lint_source(ex.source, ex.path, config)
    assert any(f.code == code for f in findings), f"{code} did not report {ex.source!r}"
    fixed, _ = fix_source(ex.source, ex.path, config)
    if ex.expected is None:
        assert fixed == ex.source, "a report-only example must not be rewritten"
        return
    assert fixed == ex.expected
    again, _ = fix_source(fixed, ex.path, config)
    if ex.path.endswith(".py"):
        compile(fixed, ex.path, "exec")
    assert again == fixed, "second run changed the output"


@pytest.mark.parametrize(("code", "example"), list(_cases("invalid", unsafe_only=True)))
def test_unsafe_examples_need_opt_in(code, example):
    ex = example
    fixed, _ = fix_source(ex.source, ex.path, _config(code, ex.target, ex.options, unsafe=False))
    assert fixed != ex.expected
