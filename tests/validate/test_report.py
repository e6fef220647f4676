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


def _fails(n: int, prefix: str = "s0/grad/0:transformer.h.0.attn.c_attn.") -> ValidationResult:
    from cuda2neuron.validate._model import TensorComparison

    rows = tuple(TensorComparison(
        f"{prefix}{'weight' if i % 2 else 'bias'}{i}", "grad", 0, "0:x", "X", (2,), (2,), "float32", "float32", "cpu",
        "neuron", 0.5, 0.5, 0.1, 1e-7, 0.5, 8e-5, 0, Verdict.FAIL, "error 5.00e-01 > 6.40e-04 (vs golden)",
        check="logic" if i % 3 else "precision") for i in range(n))
    return ValidationResult(verdict=Verdict.FAIL, mode="script", target="train.py", original="o", port="p",
                            golden_used=True, comparisons=rows)


def _rich_text(result: ValidationResult, width: int = 100) -> str:
    console = Console(record=True, width=width)
    for part in to_rich(result):
        console.print(part)
    return console.export_text()


@pytest.mark.parametrize("n", [3, 209], ids=["few-all-shown", "many-n-more"])
def test_a_fail_shows_every_failing_tensor_or_says_how_many_more(n):
    """31: ~40 of 209 failing tensors were shown and nothing said there were more."""
    result = _fails(n)
    text, md = _rich_text(result, 240), to_markdown(result)
    shown = sum(1 for c in result.comparisons if c.key in text)
    more = n - shown
    assert shown == min(n, 40)
    assert (f"{more} more not shown" in text) is (more > 0)
    assert (f"{more} more not shown" in md) is (more > 0)


def test_tensor_names_are_folded_never_cut_into_identical_strings():
    """31: two long names were cut to the same `s0/grad/0:transformer.h.0.attn…` in a narrow table."""
    result = _fails(2)
    text = _rich_text(result, width=80)
    table = text.split("tensors that did not pass")[1]
    assert "…" not in table
    names: list[str] = []
    for line in table.splitlines():
        cells = line.split("│")
        if len(cells) < 4:
            continue
        if cells[1].strip():  # a row starts where its verdict is
            names.append("")
        names[-1] += cells[3].strip()
    assert names == [c.key for c in result.comparisons]


def test_the_summary_says_both_checks_and_what_was_not_judged():
    from dataclasses import replace

    from cuda2neuron.validate._report import headline, verdict_line

    result = _fails(4)
    passed = tuple(replace(c, verdict=Verdict.PASS, judged=c.check == "logic") for c in result.comparisons)
    result = replace(result, comparisons=passed, verdict=Verdict.PASS)
    assert headline(result).startswith("logic PASS · precision PASS")
    assert "(2 not judged)" in headline(result)
    assert verdict_line(result).startswith("PASS logic=PASS precision=PASS tensors=4 pass=4 warn=0 fail=0 not_judged=2")
    assert "logic PASS" in _rich_text(result)


def test_the_residency_line_counts_the_optimizer_step_counters_apart():
    """31: "PASS: 49.4% of ops on device" — half the CPU ops were torch.optim's host step counters."""
    audit = ResidencyAudit(True, "", 500, 490, 10**6, 490, 0, 0, (), Verdict.PASS, (), (), optimizer_host_ops=480)
    result = ValidationResult(verdict=Verdict.PASS, mode="entry", target="e:b", original="o", port="p",
                              golden_used=True, audit=audit)
    text = _rich_text(result, 240)
    assert "98.0% of ops (480 one-element optimizer step-counter ops on the host" in text
    assert "of them 480 optimizer step counters" in to_markdown(result)
