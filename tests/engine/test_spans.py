"""Spans of reported nodes: ``spans_of`` (stops once the last wanted node has ended) gives the
spans the whole code generation gives, and libcst's own PositionProvider agrees on expressions."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from cuda2neuron.python import spans_and_code
from cuda2neuron.python._positions import spans_of

SOURCE = '''import torch

# a leading comment
x = torch.ones(2).cuda()
if torch.cuda.is_available():
    y = x.to("cuda:0")  # trailing
z = [torch.device("cuda") for _ in range(3)]
'''


class _Pick(cst.CSTVisitor):
    def __init__(self, kinds: tuple[type[cst.CSTNode], ...]) -> None:
        self.kinds = kinds
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found.append(node)
        return True


CASES = [
    # id, node kinds wanted, which of them (slice)
    ("first-statement", (cst.SimpleStatementLine,), slice(0, 1)),
    ("statement-after-a-comment", (cst.SimpleStatementLine,), slice(1, 2)),
    ("nested-calls", (cst.Call,), slice(None)),
    ("the-last-node", (cst.SimpleString,), slice(-1, None)),
    ("strings-and-their-statements", (cst.SimpleString, cst.SimpleStatementLine), slice(None)),
    ("an-if-block", (cst.If,), slice(None)),
]


@pytest.mark.parametrize(("kinds", "which"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_spans_of_equals_the_full_generation(kinds, which):
    module = cst.parse_module(SOURCE)
    picker = _Pick(kinds)
    module.visit(picker)
    nodes = picker.found[which]
    assert nodes
    full, code = spans_and_code(module, nodes)
    assert code == SOURCE
    assert spans_of(module, nodes) == full


def test_expression_spans_match_libcst_positions():
    wrapper = MetadataWrapper(cst.parse_module(SOURCE))
    positions = wrapper.resolve(PositionProvider)
    picker = _Pick((cst.Call, cst.SimpleString))
    wrapper.module.visit(picker)
    spans = spans_of(wrapper.module, picker.found)
    for node in picker.found:
        pos = positions[node]
        span = spans[id(node)]
        assert (span.start_line, span.start_col, span.end_line, span.end_col) == (
            pos.start.line, pos.start.column, pos.end.line, pos.end.column), cst.Module([]).code_for_node(node)


def test_generation_stops_after_the_last_wanted_node(monkeypatch):
    module = cst.parse_module(SOURCE)
    first = module.body[0]

    def boom(self, state):  # noqa: ANN001 - libcst's signature
        raise AssertionError("generated past the last wanted node")

    # Only the file's last statement holds a list comprehension.
    monkeypatch.setattr(cst.ListComp, "_codegen_impl", boom)
    assert id(first) in spans_of(module, [first])
    with pytest.raises(AssertionError, match="generated past"):
        spans_and_code(module, [first])


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_spans_match_libcst_positions_on_every_fixture():
    # Lines and columns counted over runs of generated tokens (not token by token): every call,
    # string and attribute of every fixture where libcst's PositionProvider puts it.
    differ = []
    for path in sorted(FIXTURES.rglob("*.py")):
        wrapper = MetadataWrapper(cst.parse_module(path.read_bytes()))
        positions = wrapper.resolve(PositionProvider)
        picker = _Pick((cst.Call, cst.SimpleString, cst.Attribute))
        wrapper.module.visit(picker)
        spans, _ = spans_and_code(wrapper.module, picker.found)
        for node in picker.found:
            pos, span = positions[node], spans[id(node)]
            if (span.start_line, span.start_col, span.end_line, span.end_col) != (
                pos.start.line, pos.start.column, pos.end.line, pos.end.column):
                differ.append(f"{path.name}:{pos.start.line}")
    assert differ == []
