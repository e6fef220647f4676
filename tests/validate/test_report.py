"""Rendering of results: what people read in the summary and in --report FILE.md."""

from __future__ import annotations

import pytest
from rich.console import Console

from cuda2neuron.validate import CpuOpFinding, ResidencyAudit, ValidationResult, Verdict
from cuda2neuron.cli._validate import to_rich
from cuda2neuron.validate._report import to_markdown

# (id, op locations, text the CPU-op line must show)
WHERE = [
    ("user-lines", ("train.py:12", "train.py:13"), "train.py:12, train.py:13"),
    ("no-user-frame", (), "(no line of your code: inside torch or a library)"),
]


def _result(locations: tuple[str, ...]) -> ValidationResult:
    audit = ResidencyAudit(True, "", 10, 1, 100, 1, 0, 0, (CpuOpFinding("aten::_foreach_add_", 1, 1, locations),),
                           Verdict.PASS, (), ())
    return ValidationResult(verdict=Verdict.PASS, mode="entry", target="e:b", original="o", port="p",
                            golden_used=True, audit=audit)


@pytest.mark.parametrize(("locations", "shown"), [w[1:] for w in WHERE], ids=[w[0] for w in WHERE])
def test_cpu_op_locations_are_never_blank(locations, shown):
    result = _result(locations)
    assert f"| {shown} |" in to_markdown(result)
    console = Console(record=True, width=200)
    for part in to_rich(result):
        console.print(part)
    assert f"at {shown}" in console.export_text()


def test_audit_failure_shows_the_hand_edits_in_both_renderings():
    from dataclasses import replace

    from cuda2neuron.validate._model import HandEdit

    result = _result(("main.py:67",))
    audit = replace(result.audit, verdict=Verdict.FAIL, hand_edits=(HandEdit("main.py", 67, "changed", 'device = "cpu"'),))
    result = replace(result, verdict=Verdict.FAIL, audit=audit)
    assert '  - `main.py:67` changed: `device = "cpu"`' in to_markdown(result)
    console = Console(record=True, width=200)
    for part in to_rich(result):
        console.print(part)
    assert 'changed main.py:67  device = "cpu"' in console.export_text()


@pytest.mark.parametrize(("verdict", "fail_on", "code"), [
    pytest.param("PASS", "warn", 0, id="pass-with-fail-on-warn"),
    pytest.param("WARN", "fail", 0, id="warn-default-exits-0"),
    pytest.param("WARN", "warn", 1, id="warn-with-fail-on-warn-exits-1"),
    pytest.param("FAIL", "fail", 1, id="fail-exits-1"),
    pytest.param("ERROR", "warn", 2, id="error-exits-2"),
])
def test_fail_on_warn_sets_the_exit_code(verdict, fail_on, code):
    from cuda2neuron.validate._model import ValidationResult, Verdict as V

    r = ValidationResult(verdict=V(verdict), mode="entry", target="m:b", original="o", port="p", golden_used=True,
                         fail_on=fail_on)
    assert r.exit_code == code
