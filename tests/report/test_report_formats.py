"""Every output format, rendered from reports the real engine built (tests/report/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
import re
from html.parser import HTMLParser
from xml.etree import ElementTree as ET

import pytest

from cuda2neuron.report import (
    OUTPUT_FORMATS,
    SCHEMA_VERSION,
    finding_status,
    render,
    to_concise,
    to_github,
    to_gitlab,
    to_json,
    to_json_lines,
    to_junit,
    to_text,
)

UNSAFE = {"u.py": "import torch\ntorch.backends.cudnn.benchmark = True\nx = 1\n"}
DISPLAY_ONLY = {"d.py": "if x.is_cuda:\n    y = ext.fused(x)\n"}


# -- status: fixable findings are not manual actions ---------------------------------------


@pytest.mark.parametrize(
    ("sources", "fix", "expected"),
    [
        pytest.param({"a.py": "x = y.cuda()\n"}, False, {"CN101": "fixable"}, id="safe-fix-not-applied"),
        pytest.param({"a.py": "x = y.cuda()\n"}, True, {"CN101": "fixed"}, id="safe-fix-applied"),
        pytest.param(UNSAFE, True, {"CN205": "fixable"}, id="unsafe-fix-without-flag"),
        pytest.param(DISPLAY_ONLY, False, {"CN104": "manual"}, id="display-only-is-manual"),
        pytest.param({"a.py": "import apex\n"}, False, {"CN606": "manual"}, id="no-fix-is-manual"),
    ],
)
def test_finding_status(make_report, sources, fix, expected):
    report = make_report(sources, fix=fix)
    assert {f.code: finding_status(f) for r in report.results for f in r.findings} == expected
    manual = {f.code for f in report.manual}
    assert manual == {c for c, s in expected.items() if s == "manual"}
    fixable = {f.code for f in (*report.fixable, *report.unsafe_fixable)}
    assert fixable == {c for c, s in expected.items() if s == "fixable"}


# -- json -----------------------------------------------------------------------------------


def test_json_is_versioned_one_based_and_splits_fixable(make_report):
    data = json.loads(to_json(make_report()))
    assert data["schema_version"] == SCHEMA_VERSION == 1
    assert data["summary"]["fixable"] + data["summary"]["unsafe_fixable"] == len(data["fixable"]) == 2
    assert {f["code"] for f in data["manual_actions"]} == {"CN606"}
    cuda = next(f for f in data["fixable"] if f["code"] == "CN101")
    # `model = Net().cuda()`: the call starts at the 9th character, as the text format says.
    assert (cuda["line"], cuda["col"], cuda["end_col"]) == (2, 9, 21)
    assert cuda["status"] == "fixable"
    # `def (:` fails at the `(`: line 2, column 5
    assert data["failures"][0]["path"] == "pkg/broken.py"
    assert (data["failures"][0]["line"], data["failures"][0]["col"]) == (2, 5)


def test_json_columns_match_text(make_report):
    report = make_report()
    text_locations = set(re.findall(r"^(\S+?):(\d+):(\d+): (CN\d+)", to_concise(report), re.M))
    data = json.loads(to_json(report))
    json_locations = {(f["path"], str(f["line"]), str(f["col"]), f["code"]) for f in data["fixable"] + data["manual_actions"]}
    assert text_locations == json_locations and json_locations


def test_json_lines_one_object_per_finding_and_failure(make_report):
    report = make_report()
    lines = to_json_lines(report).splitlines()
    records = [json.loads(line) for line in lines]
    findings = [r for r in records if r["type"] == "finding"]
    assert len(findings) == sum(len(r.findings) for r in report.results) == 3
    assert [r["path"] for r in records if r["type"] == "failure"] == ["pkg/broken.py"]
    assert all(r["col"] >= 1 for r in findings)


# -- text / concise -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "unsafe_fixes", "expected_line"),
    [
        pytest.param({"a.py": "x = y.cuda()\n"}, False,
                     "a.py:1:5: CN101 `.cuda()` places the tensor on a CUDA device [fixable: --fix]", id="safe"),
        pytest.param(UNSAFE, False, "u.py:2:1: CN205 `torch.backends.cudnn.benchmark` has no effect on Neuron "
                     "[fixable: --fix --unsafe-fixes]", id="unsafe-without-flag"),
        pytest.param(UNSAFE, True, "u.py:2:1: CN205 `torch.backends.cudnn.benchmark` has no effect on Neuron "
                     "[fixable: --fix]", id="unsafe-with-flag"),
        pytest.param(DISPLAY_ONLY, True, "d.py:1:4: CN104 `.is_cuda` tests for a CUDA device [no automatic fix]",
                     id="display-only-never-promised"),
        pytest.param({"a.py": "import apex\n"}, False, "a.py:1:1: CN606 apex is CUDA-only and not available on Trainium",
                     id="no-fix"),
    ],
)
def test_concise_line_says_what_the_flags_would_do(make_report, sources, unsafe_fixes, expected_line):
    assert to_concise(make_report(sources), unsafe_fixes) == expected_line + "\n"


@pytest.mark.parametrize(("show_fixes", "expected"), [(False, ""), (True, "[fixed]")], ids=["hidden", "shown"])
def test_concise_lists_fixed_findings_only_with_show_fixes(make_report, show_fixes, expected):
    out = to_concise(make_report({"a.py": "x = y.cuda()\n"}, fix=True), show_fixes=show_fixes)
    assert out == "" if not expected else out.rstrip().endswith(expected)


def test_text_shows_source_with_carets_under_the_finding(make_report):
    out = to_text(make_report({"a.py": "import torch\nmodel = Net().cuda()\nz = 2\n"}))
    lines = out.splitlines()
    assert lines[0] == "a.py:2:9: CN101 `.cuda()` places the tensor on a CUDA device [fixable: --fix]"
    assert "2 | model = Net().cuda()" in lines
    caret_line = lines[lines.index("2 | model = Net().cuda()") + 1]
    # the carets sit under `Net().cuda()` (columns 9-20), in the source's column frame
    assert caret_line == "  |         ^^^^^^^^^^^^ CN101"
    assert "3 | z = 2" in lines  # context after


@pytest.mark.parametrize(
    ("sources", "show_fixes", "note"),
    [
        pytest.param(UNSAFE, True, "  = fix (unsafe): remove the statement → (removed)", id="unsafe-shown"),
        pytest.param(UNSAFE, False, None, id="unsafe-hidden"),
        pytest.param({"a.py": "x = y.cuda()\n"}, True, '  = fix (safe): replace `.cuda(...)` with `.to(<device>)` → y.to("neuron")',
                     id="safe-shown"),
        pytest.param(DISPLAY_ONLY, False, "  = suggested, to apply by hand: x.is_neuron", id="display-only-always"),
    ],
)
def test_text_fix_lines(make_report, sources, show_fixes, note):
    lines = to_text(make_report(sources), show_fixes=show_fixes).splitlines()
    fix_lines = [line for line in lines if line.startswith(("  = fix", "  = suggested"))]
    assert fix_lines == ([] if note is None else [note]), lines


@pytest.mark.parametrize(
    ("name", "snippet"),
    [
        pytest.param("a.py", True, id="python"),
        pytest.param("run.sh", True, id="shell"),
        pytest.param("e.ipynb", True, id="notebook-columns-are-file-columns"),
    ],
)
def test_text_snippet_carets_sit_under_the_finding(make_report, name, snippet):
    sources = {
        "a.py": "x = y.cuda()\n",
        "run.sh": "export CUDA_VISIBLE_DEVICES=0,1\n",
        "e.ipynb": json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                                          "source": ["import torch\n", "y = x.cuda()\n"]}],
                               "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1),
    }
    out = to_text(make_report({name: sources[name]}))
    assert out.startswith(name + ":")
    assert (" | " in out) is snippet, out
    # The carets mark the finding's own text in the line above them (a notebook's JSON line too).
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "^" in line)
    caret_line, text_line = lines[at], lines[at - 1]
    begin = caret_line.index("^")
    end = caret_line.rindex("^") + 1
    assert "cuda" in text_line[begin:end].lower(), (text_line, caret_line)


def test_text_reads_stdin_source_from_the_given_sources(make_report, tmp_path):
    report = make_report({"a.py": "x = y.cuda()\n"})
    (tmp_path / "a.py").unlink()  # as for stdin: nothing on disk
    assert "1 | x = y.cuda()" not in to_text(report)
    assert "1 | x = y.cuda()" in to_text(report, sources={"a.py": b"x = y.cuda()\n"})


# -- github ---------------------------------------------------------------------------------


def test_github_annotations(make_report):
    lines = to_github(make_report()).splitlines()
    assert "::error file=pkg/train.py,line=2,col=9,endLine=2,endColumn=21," in lines[0]
    assert lines[0].split("::", 2)[2].startswith("CN101 ")
    assert any(line.startswith("::error file=pkg/broken.py,line=2") for line in lines)
    assert all(re.match(r"^::(error|notice) [^:]*::.+$", line) for line in lines), lines


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("dir,name/a.py", "file=dir%2Cname/a.py,", id="comma"),
        pytest.param("c:/a.py", "file=c%3A/a.py,", id="colon"),
        pytest.param("100%/a.py", "file=100%25/a.py,", id="percent"),
    ],
)
def test_github_escapes_properties(make_report, path, expected):
    assert expected in to_github(make_report({path: "x = y.cuda()\n"}))


def test_github_fixed_findings_are_notices(make_report):
    assert to_github(make_report({"a.py": "x = y.cuda()\n"}, fix=True)).startswith("::notice ")


# -- gitlab ---------------------------------------------------------------------------------


def test_gitlab_code_quality(make_report):
    issues = json.loads(to_gitlab(make_report()))
    assert isinstance(issues, list) and issues
    for issue in issues:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["lines"]["begin"] >= 1
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    cuda = next(i for i in issues if i["check_name"] == "CN101")
    assert cuda["location"] == {"path": "pkg/train.py", "lines": {"begin": 2, "end": 2}}


def test_gitlab_fingerprint_survives_moved_lines(make_report):
    def fingerprints(src):
        return {i["check_name"]: i["fingerprint"] for i in json.loads(to_gitlab(make_report({"a.py": src})))}

    before = fingerprints("import apex\n")
    after = fingerprints("\n\n# moved\nimport apex\n")
    assert before == after and before


def test_gitlab_two_equal_findings_differ(make_report):
    issues = json.loads(to_gitlab(make_report({"a.py": "import apex\nimport apex\n"})))
    assert len(issues) == 2 and issues[0]["fingerprint"] != issues[1]["fingerprint"]


# -- junit ----------------------------------------------------------------------------------


def test_junit_parses_with_a_suite_per_file(make_report):
    root = ET.fromstring(to_junit(make_report()))
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"pkg/train.py", "pkg/ext.py", "pkg/plain.py", "pkg/broken.py"}
    train = suites["pkg/train.py"]
    assert {c.get("name").split()[0] for c in train.findall("testcase")} == {"CN101", "CN301"}
    assert train.get("failures") == "2" and train.find("testcase/failure") is not None
    assert suites["pkg/plain.py"].find("testcase/failure") is None  # a clean file passes
    assert suites["pkg/broken.py"].find("testcase/error").get("type") == "parse"
    assert root.get("tests") == str(sum(int(s.get("tests")) for s in suites.values()))
    assert root.get("failures") == "3" and root.get("errors") == "1"


# -- the table of formats -------------------------------------------------------------------


PARSERS = {
    "text": None,
    "full": None,
    "concise": None,
    "json": json.loads,
    "json-lines": lambda s: [json.loads(line) for line in s.splitlines()],
    "sarif": json.loads,
    "github": None,
    "gitlab": json.loads,
    "junit": ET.fromstring,
    "html": lambda s: HTMLParser().feed(s),
}


@pytest.mark.parametrize("fmt", OUTPUT_FORMATS)
def test_every_format_renders_and_names_the_findings(make_report, fmt):
    out = render(make_report(), fmt)
    assert "CN101" in out and "CN606" in out
    if PARSERS[fmt] is not None:
        PARSERS[fmt](out)


def test_unknown_format_is_an_error(make_report):
    with pytest.raises(ValueError, match="unknown output format 'xml'"):
        render(make_report(), "xml")


def test_table_of_parsers_covers_every_format():
    assert set(PARSERS) == set(OUTPUT_FORMATS)


def test_documented_json_example_has_the_real_fields(make_report):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "output-formats.md").read_text(encoding="utf-8")
    example = json.loads(doc.split("```json\n", 1)[1].split("```", 1)[0].replace("…", ""))
    real = json.loads(to_json(make_report()))
    assert set(example) == set(real)
    assert set(example["summary"]) == set(real["summary"])
    assert set(example["fixable"][0]) == set(real["fixable"][0])
    assert set(example["files"][0]) == set(real["files"][0])
    assert set(example["failures"][0]) == set(real["failures"][0])
    assert example["schema_version"] == SCHEMA_VERSION
