"""The effort estimate: hours per finding left, bands that tell an hour from a day and a day from
a week, one phrase for every output; the scale docs/output-formats.md ("Effort") documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cuda2neuron.core import Effort, Finding, Fix, Safety, Span
from cuda2neuron.report import EFFORT_BANDS, EFFORT_HOURS, REVIEW_HOURS, describe_effort, effort_level, finding_hours

DOC = (Path(__file__).resolve().parents[2] / "docs" / "output-formats.md").read_text(encoding="utf-8")


def _finding(effort: Effort, safety: Safety | None, applied: bool = False) -> Finding:
    fix = None if safety is None else Fix(safety, "x", "")
    return Finding("CN101", "cuda-method-call", "m", "a.py", Span(1, 0, 1, 1), fix, applied=applied, effort=effort)


@pytest.mark.parametrize(
    ("finding", "hours"),
    [
        pytest.param(_finding(Effort.HIGH, None), 8.0, id="manual-high-is-a-day"),
        pytest.param(_finding(Effort.MEDIUM, Safety.DISPLAY_ONLY), 1.0, id="display-only-is-manual"),
        pytest.param(_finding(Effort.LOW, None), 0.25, id="manual-low"),
        pytest.param(_finding(Effort.MEDIUM, Safety.UNSAFE), REVIEW_HOURS, id="unsafe-fix-costs-its-review"),
        pytest.param(_finding(Effort.NONE, Safety.UNSAFE), 0.0, id="unsafe-fix-of-no-effort"),
        pytest.param(_finding(Effort.MEDIUM, Safety.SAFE), 0.0, id="safe-fix-costs-nothing"),
        pytest.param(_finding(Effort.HIGH, None, applied=True), 0.0, id="applied"),
    ],
)
def test_hours_per_finding(finding, hours):
    assert finding_hours(finding) == hours


@pytest.mark.parametrize(
    ("hours", "text"),
    [
        pytest.param(0, "none", id="none"),
        pytest.param(0.25, "~15 min (low: up to an hour)", id="minutes"),
        pytest.param(1, "~1 h (low: up to an hour)", id="an-hour"),
        pytest.param(3, "~3 h (medium: up to a day)", id="hours"),
        # The pair: 3 h and 14.5 h used to print the same "more than 2.5 hours".
        pytest.param(14.5, "~14.5 h, about 2 days (high: up to a week)", id="days"),
        pytest.param(40, "~40 h, about 5 days (high: up to a week)", id="a-week"),
        pytest.param(60, "~60 h, about 1.5 weeks (very-high: more than a week)", id="weeks"),
        pytest.param(8.5, "~8.5 h, about 1 day (high: up to a week)", id="one-day-singular"),
    ],
)
def test_effort_phrases(hours, text):
    assert describe_effort(hours) == text


def test_bands_are_ordered_and_cover_every_total():
    bounds = [b for b, _, _ in EFFORT_BANDS]
    assert bounds == sorted(bounds) and bounds[-1] == float("inf")
    assert [effort_level(h) for h in (0, 0.5, 1, 1.25, 8, 8.25, 40, 41)] == [
        "none", "low", "low", "medium", "medium", "high", "high", "very-high"]


def test_the_documented_scale_is_the_code():
    section = DOC.split("## Effort\n", 1)[1].split("\n## ", 1)[0]
    for effort, hours in EFFORT_HOURS.items():
        if effort is not Effort.NONE:
            assert re.search(rf"^\| {effort.value} \| {hours:g}\b", section, re.M), effort
    assert f"at most {REVIEW_HOURS:g}" in section
    for example in re.findall(r"`(~[^`]+)`", section):
        amount = float(re.match(r"~([\d.]+) (min|h)", example).group(1))
        unit = re.match(r"~[\d.]+ (min|h)", example).group(1)
        assert describe_effort(amount / 60 if unit == "min" else amount) == example
    for _, level, meaning in EFFORT_BANDS:
        assert f"| {level} |" in section and (level == "none" or meaning in section)


# ---- pieces of work (constructs), not findings (issue 43) ----

def _at(code: str, line: int, effort: Effort = Effort.HIGH, path: str = "k.py", end: int | None = None) -> Finding:
    return Finding(code, "rule", "m", path, Span(line, 0, end or line, 1), None, effort=effort)


@pytest.mark.parametrize(("findings", "hours"), [
    # @triton.autotune (two lines) over @triton.jit: one kernel, a day; the imports nothing on top.
    pytest.param([_at("CN601", 1, Effort.LOW), _at("CN601", 2, Effort.LOW), _at("CN601", 5, end=6), _at("CN601", 7)],
                 8.0, id="a-kernel-under-two-decorators-with-its-imports"),
    pytest.param([_at("CN601", 5), _at("CN601", 6), _at("CN601", 20), _at("CN601", 21)], 16.0, id="two-kernels"),
    pytest.param([_at("CN601", 1, Effort.LOW)], 0.25, id="an-import-alone"),
    pytest.param([_at("CN601", 1, Effort.LOW), _at("CN601", 1, Effort.LOW, path="b.py")], 0.5, id="per-file"),
    # A kernel package imported through many names in a file: one decision.
    pytest.param([_at("CN616", line) for line in (3, 9, 15, 40)], 8.0, id="a-kernel-package-in-one-file"),
    pytest.param([_at("CN616", 3), _at("CN616", 3, path="b.py")], 16.0, id="a-kernel-package-in-two-files"),
    pytest.param([_at("CN618", 183), _at("CN618", 186), _at("CN618", 226)], 8.0, id="a-kernel-hub-loader"),
    # A project kernel module's import: its kernels are counted where they are defined.
    pytest.param([_at("CN617", 3), _at("CN617", 8, Effort.MEDIUM)], 1.0, id="a-project-kernel-import-is-capped"),
    # Every other rule: each finding is its own piece of work, as before.
    pytest.param([_at("CN104", 1, Effort.MEDIUM), _at("CN104", 2, Effort.MEDIUM), _at("CN104", 3, Effort.LOW)],
                 2.25, id="other-rules-per-finding"),
])
def test_effort_counts_pieces_of_work(findings, hours):
    from cuda2neuron.report import constructs

    assert sum(c.hours for c in constructs(findings)) == hours


def test_the_summary_names_the_range_and_the_top_contributors():
    from cuda2neuron.core import FileResult, FileStatus
    from cuda2neuron.report import EFFORT_RANGE, build_report

    results = [FileResult("k.py", FileStatus.UNCHANGED, findings=(_at("CN601", 5), _at("CN601", 20))),
               FileResult("b.py", FileStatus.UNCHANGED, findings=(_at("CN104", 1, Effort.MEDIUM, path="b.py"),))]
    report = build_report("migrate", "neuron", results)
    assert report.effort_hours == 17.0
    assert report.effort_range == (17.0 * EFFORT_RANGE[0], 17.0 * EFFORT_RANGE[1])
    assert report.effort_by("file") == [("k.py", 16.0), ("b.py", 1.0)]
    assert report.effort_by("rule", top=1) == [("CN601 rule", 16.0)]


def test_every_grouped_code_is_a_rule():
    from cuda2neuron.kinds import catalog
    from cuda2neuron.report import CONSTRUCT_UNITS

    assert set(CONSTRUCT_UNITS) <= set(catalog())
