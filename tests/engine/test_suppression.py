"""Suppression comments silence findings and keep their fixes from being applied."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import process_bytes
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
    # CN901 (unused suppressions) has its own tests below.
    assert len([f for f in lint_source(source) if f.code != "CN901"]) == count
    fixed, findings = fix_source(source)
    assert sum(1 for f in findings if f.applied and f.code != "CN901") == count
    assert fixed.count(".cuda()") == source.count(".cuda()") - count


# -- unknown codes: reported at the line (CN901), the rest of the file goes on ---------------
UNKNOWN = [
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN1O1]\n", "a.py", 1, "CN1O1", id="typo-letter-o"),
    pytest.param("x = 1\nx = y.cuda()  # cuda2neuron: ignore[CN101, CN999]\n", "a.py", 2, "CN999", id="one-of-two"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[cn101]\n", "a.py", 1, "cn101", id="lower-case-never-matched"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[E501]\n", "a.py", 1, "E501", id="other-tools-code"),
    pytest.param("echo hi  # cuda2neuron: ignore[CN7x]\n", "run.sh", 1, "CN7x", id="shell-script"),
    pytest.param("numpy\nflash-attn  # cuda2neuron: ignore[CN0]\n", "requirements.txt", 2, "CN0", id="requirements"),
]


@pytest.mark.parametrize(("source", "path", "line", "code"), UNKNOWN)
def test_unknown_codes_in_comments_are_reported_at_the_line(source, path, line, code):
    result = process_bytes(path, source.encode(), Config(), RunOptions())
    assert result.error is None, result.error
    (unknown,) = [f for f in result.findings if "unknown rule code" in f.message]
    assert (unknown.code, unknown.span.start_line) == ("CN901", line)
    assert code in unknown.message
    # Never written: which code was meant is for a person to say.
    assert unknown.fix is not None and unknown.fix.safety.value == "display-only"


def test_a_typo_in_a_suppression_does_not_stop_the_file():
    # The whole file used to fail on one typo: nothing else in it was checked or migrated.
    source = "import torch\nx = y.cuda()  # cuda2neuron: ignore[CN1O1]\nz = w.cuda()\nv = u.cuda()  # cuda2neuron: ignore[CN101]\n"
    result = process_bytes("a.py", source.encode(), Config(), RunOptions(fix=True))
    assert result.error is None and result.new_bytes is not None
    # The typo silences nothing (ruff's reading of an unknown noqa code): line 2 is migrated like
    # line 3; the known code on line 4 still works.
    assert result.new_bytes.decode().splitlines()[1:] == [
        'x = y.to("neuron")  # cuda2neuron: ignore[CN1O1]', 'z = w.to("neuron")', "v = u.cuda()  # cuda2neuron: ignore[CN101]",
    ]
    left = [(f.code, f.span.start_line) for f in result.findings if not f.applied]
    assert left == [("CN901", 2)]
    again = process_bytes("a.py", result.new_bytes, Config(), RunOptions(fix=True))
    assert again.new_bytes is None and [f.code for f in again.findings] == ["CN901"]  # idempotent, still reported


def test_a_comment_with_unknown_and_unused_codes_drops_only_the_unused_known_one():
    source = "x = y.cuda()  # cuda2neuron: ignore[CN101, CN301, CN9x9]\n"
    result = process_bytes("a.py", source.encode(), Config(), RunOptions(fix=True))
    assert result.new_bytes is not None
    assert result.new_bytes.decode() == "x = y.cuda()  # cuda2neuron: ignore[CN101, CN9x9]\n"
    assert [f.message for f in result.findings if not f.applied] == [
        "unknown rule code CN9x9 in a suppression comment: it silences nothing"
    ]


def test_unknown_codes_in_notebook_cells_name_the_cell():
    import json

    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# cuda2neuron: ignore[XYZ] is prose here"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
             "source": ["import torch\n", "x = y.cuda()  # cuda2neuron: ignore[CN1O1]\n"]},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    text = json.dumps(nb, indent=1)
    result = process_bytes("nb.ipynb", text.encode(), Config(), RunOptions(fix=True))
    assert result.error is None
    (unknown,) = [f for f in result.findings if f.code == "CN901"]
    assert unknown.message.startswith("cell 2, line 2: unknown rule code CN1O1")
    assert "CN1O1" in text.splitlines()[unknown.span.start_line - 1]  # the JSON line holding the cell's line
    assert result.new_bytes is not None and b'.to(\\"neuron\\")' in result.new_bytes  # the cell was still migrated


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('msg = "# cuda2neuron: ignore[XYZ]"\n', id="inside-a-string"),
        pytest.param('"""Write `# cuda2neuron: ignore[CN1O1]`."""\n', id="inside-a-docstring"),
    ],
)
def test_directives_in_python_strings_are_not_comments(source):
    result = process_bytes("a.py", source.encode(), Config(), RunOptions())
    assert result.error is None
    assert [f.code for f in result.findings] == []


# -- unused suppressions (CN901) --------------------------------------------------------------
UNUSED = [
    pytest.param("x = 1  # cuda2neuron: ignore[CN101]\n", ("CN",), ["CN901"], id="nothing-to-hide"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN101]\n", ("CN",), [], id="used"),
    # Judged with every rule: a narrow --select never makes a needed comment look unused.
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN101]\n", ("CN3", "CN9"), [], id="used-by-unselected-rule"),
    pytest.param("x = 1  # cuda2neuron: ignore[CN101]\n", ("CN1",), [], id="cn901-not-selected"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN101, CN301]\n", ("CN",), ["CN901"], id="one-code-unused"),
    pytest.param("x = y.cuda()  # cuda2neuron: ignore[CN1, CN3]\n", ("CN",), [], id="families-kept-when-used"),
    pytest.param("x = f(\n    y.cuda(),  # cuda2neuron: ignore[CN101]\n)\n", ("CN",), [], id="multi-line-call"),
]


@pytest.mark.parametrize(("source", "select", "codes"), UNUSED)
def test_unused_suppressions(source, select, codes):
    result = process_bytes("a.py", source.encode(), Config(select=select), RunOptions())
    assert [f.code for f in result.findings if f.code == "CN901"] == codes


FIXED = [
    pytest.param("x = 1  # cuda2neuron: ignore[CN101]\r\ny = 2\r\n", "x = 1\r\ny = 2\r\n", id="crlf-kept"),
    pytest.param("# cuda2neuron: ignore\nx = y.cuda()\n", 'x = y.to("neuron")\n', id="own-line-removed-with-line"),
    pytest.param(
        "x = 1  # noqa: E501  # cuda2neuron: ignore[CN101]\n", "x = 1  # noqa: E501\n", id="other-comment-kept"
    ),
]


@pytest.mark.parametrize(("source", "expected"), FIXED)
def test_unused_suppressions_are_removed_by_fixes(source, expected):
    result = process_bytes("a.py", source.encode(), Config(), RunOptions(fix=True))
    assert result.new_bytes is not None and result.new_bytes.decode() == expected
    again = process_bytes("a.py", result.new_bytes, Config(), RunOptions(fix=True))
    assert again.new_bytes is None  # idempotent


def test_findings_below_a_removed_line_move_up():
    source = "# cuda2neuron: ignore[CN101]\nimport torch\nif x.is_cuda:\n    y = ext.fused(x)\n"
    result = process_bytes("a.py", source.encode(), Config(), RunOptions(fix=True))
    assert result.new_bytes is not None
    left = [f for f in result.findings if not f.applied]
    assert [(f.code, f.span.start_line) for f in left] == [("CN104", 2)]
    assert result.new_bytes.decode().splitlines()[1] == "if x.is_cuda:"
