"""Every finding and every edit is located in the file as read, whatever the fixed point did.

For every Python fixture pair (each variant), the span of each applied edit must hold, in the
input, the text that edit replaced, and the span of each remaining finding the text it is about:
the report formats (text, json, sarif, html, md) all print these spans, and a location in the
coordinates of a later round pointed, after a `set_device` call moved below
`init_process_group`, at the wrong line. Where an edit replaced code an earlier round had
already edited (a `torch.compile(...)` given `backend=` and then stripped of its mode), its span
holds the *original* code: the earlier edits inside it, put back, give the text it replaced.
Texts are compared without whitespace, comments and a trailing comma (a statement's span starts
after its comment lines, an argument's ends before its comma).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import libcst as cst
import pytest

from cuda2neuron.core import Config, Span
from cuda2neuron.kinds._catalog import rules_for
from cuda2neuron.python import fix_module
from cuda2neuron.workspace import fix_source

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_fixture_pairs as pairs  # noqa: E402

PYTHON_PAIRS = [p for p in pairs.PAIR_LIST if p.ext == "py"]


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _cut(text: str, starts: list[int], span: Span) -> tuple[int, int]:
    return starts[span.start_line - 1] + span.start_col, starts[span.end_line - 1] + span.end_col


def _norm(text: str) -> str:
    # A tuple's span leaves out its parentheses, as libcst's positions do.
    text = re.sub(r"\s+", "", re.sub(r"#[^\n]*", "", text)).rstrip(",")
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].rstrip(",")
    return text


def _with_earlier_edits(text: str, starts: list[int], span: Span, earlier) -> str:
    """``span``'s text with the outermost earlier edits inside it replaced by their output
    (``earlier``: (round, finding); of two edits of one span, the later one's output holds the
    earlier one's)."""
    lo, hi = _cut(text, starts, span)
    inside = [(a, b, f, n) for n, f in earlier for a, b in [_cut(text, starts, f.span)] if lo <= a and b <= hi]

    def covers(o, e) -> bool:
        return o is not e and o[0] <= e[0] and e[1] <= o[1] and ((o[0], o[1]) != (e[0], e[1]) or o[3] > e[3])

    outer = [e for e in inside if not any(covers(o, e) for o in inside)]
    out = text[lo:hi]
    for a, b, f, _ in sorted(outer, key=lambda e: e[0], reverse=True):
        out = out[: a - lo] + f.fix.replacement + out[b - lo :]
    return out


def _assert_holds(text: str, starts: list[int], finding, expected: str, earlier) -> None:
    """The span holds ``expected`` once the earlier edits inside it are put back; or ``expected``
    is code an earlier edit built (a call inside a rewritten decorator), and the span is that
    edit's: the original code it stands for."""
    rebuilt = _with_earlier_edits(text, starts, finding.span, earlier)
    if _norm(rebuilt) == _norm(expected):
        return
    lo, hi = _cut(text, starts, finding.span)
    if expected.lstrip().startswith(("import ", "from ")):
        # An import statement whose unused names the engine removed (no finding of its own).
        assert set(re.findall(r"\w+", expected)) <= set(re.findall(r"\w+", text[lo:hi])), finding
        return
    built_by = [f for _, f in earlier if f.span == finding.span]
    assert built_by and _norm(expected) in _norm(rebuilt), (
        f"{finding.code} at {finding.span}: {text[lo:hi]!r} is not {expected!r}"
    )


def _run(pair):
    source = pair.source.read_bytes()
    config = pairs._config(pair, source)
    text = source.decode("utf-8")
    rules = tuple(r for r in rules_for(config, pair.logical_name) if "python" in r.file_kinds)
    outcome = fix_module(
        cst.parse_module(text), rules, pair.logical_name, config.settings, unsafe=config.unsafe_fixes, source=text
    )
    return text, outcome


@pytest.mark.parametrize("pair", PYTHON_PAIRS, ids=[p.id for p in PYTHON_PAIRS])
def test_every_span_holds_the_original_text(pair):
    text, outcome = _run(pair)
    starts = _offsets(text)
    rounds = outcome.replaced_texts()
    for finding, (n, replaced) in zip(outcome.applied, rounds):
        lo, hi = _cut(text, starts, finding.span)
        if _norm(text[lo:hi]) == _norm(replaced):
            continue
        earlier = [(m, f) for f, (m, _) in zip(outcome.applied, rounds) if m < n]
        _assert_holds(text, starts, finding, replaced, earlier)
    for finding, about in zip(outcome.remaining, outcome.remaining_texts()):
        lo, hi = _cut(text, starts, finding.span)
        if _norm(text[lo:hi]) == _norm(about):
            continue
        _assert_holds(text, starts, finding, about, [(m, f) for f, (m, _) in zip(outcome.applied, rounds)])


def test_a_moved_set_device_keeps_each_finding_on_its_own_line():
    # The issue's minimal case: CN404 moves set_device below init_process_group; CN401's "nccl"
    # was reported at line 2, col 29 (inside `set_device(...)`), CN201 at line 3.
    source = "def setup(rank):\n    torch.cuda.set_device(rank)\n    dist.init_process_group(\"nccl\")\n"
    source = "import torch\nimport torch.distributed as dist\n\n\n" + source
    _, findings = fix_source(source, "setup.py", Config())
    where = {f.code: (f.span.start_line, f.span.start_col, f.span.end_col) for f in findings}
    assert where["CN401"] == (7, 28, 34)  # "nccl"
    assert where["CN201"] == (6, 4, 25)  # torch.cuda.set_device
    assert where["CN404"][0] == 6


def test_findings_after_a_removed_line_keep_their_lines():
    # An unsafe fix deletes a line; what follows it is reported where it is in the input, not one
    # line up, as the output counts its lines.
    source = (
        "import torch\n"
        "torch.backends.cudnn.benchmark = True\n"
        "if ok:\n"
        "    y = torch.cuda.get_device_capability()\n"
        "else:\n"
        "    torch.backends.cudnn.deterministic = True\n"
        "    z = torch.cuda.get_device_capability()\n"
    )
    _, findings = fix_source(source, "m.py", Config(unsafe_fixes=True))
    where = sorted((f.code, f.span.start_line, f.applied) for f in findings)
    assert where == [("CN202", 4, False), ("CN202", 7, False), ("CN205", 2, True), ("CN205", 6, True)]
