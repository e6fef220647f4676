"""libcst's import helpers decide once per class whether they have marked methods
(cuda2neuron/python/_matcher_scan.py), and a visitor with marked methods still gets them called."""

from __future__ import annotations

import builtins

import libcst as cst
import libcst.matchers as m
import pytest
from libcst.matchers import _visitors

from cuda2neuron.core import Config
from cuda2neuron.python._matcher_scan import install
from cuda2neuron.workspace import fix_source

# CN201 adds `import torch` and removes the `from torch.cuda` import: both libcst helpers.
SOURCE = "from torch.cuda import empty_cache\nempty_cache()\n"
FIXED = "import torch\n\ntorch.neuron.empty_cache()\n"


def test_an_import_fix_walks_no_visitors_methods_once_their_class_is_known(monkeypatch) -> None:
    assert fix_source(SOURCE, "train.py", Config(select=("CN201",)))[0] == FIXED
    walked: list[str] = []

    def counting_dir(*args: object) -> list[str]:
        if args:
            walked.append(type(args[0]).__name__)
        return builtins.dir(*args)

    # libcst's scanners call dir() on each new visitor: a module global shadows the builtin.
    monkeypatch.setattr(_visitors, "dir", counting_dir, raising=False)
    assert fix_source(SOURCE, "train.py", Config(select=("CN201",)))[0] == FIXED
    assert walked == []


class _Marked(m.MatcherDecoratableVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    @m.visit(m.Name("x"))
    def _on_x(self, node: cst.Name) -> None:
        self.seen.append("visit x")

    @m.leave(m.Name("y"))
    def _left_y(self, node: cst.Name) -> None:
        self.seen.append("leave y")

    @m.call_if_inside(m.Call(func=m.Name("f")))
    def visit_Name(self, node: cst.Name) -> None:
        self.seen.append(f"name in f: {node.value}")


class _Unmarked(m.MatcherDecoratableVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.seen.append(f"name: {node.value}")


class _MarkedSubclass(_Marked):
    pass


class _Borrowing(m.MatcherDecoratableVisitor):
    def __init__(self) -> None:
        # A marked method of another visitor, on the instance before libcst's scan: libcst finds
        # it in dir(self), and the class cannot vouch for it.
        lender = _Marked()
        self.on_x = lender._on_x
        super().__init__()
        self.seen = lender.seen


@pytest.mark.parametrize(
    ("make", "seen"),
    [
        pytest.param(_Marked, ["name in f: f", "visit x", "name in f: x", "leave y"], id="marked-methods"),
        pytest.param(_MarkedSubclass, ["name in f: f", "visit x", "name in f: x", "leave y"], id="inherited-marks"),
        pytest.param(_Unmarked, ["name: f", "name: x", "name: y"], id="no-marks"),
        pytest.param(_Borrowing, ["visit x"], id="marked-method-on-the-instance"),
    ],
)
def test_marked_methods_are_still_called(make, seen) -> None:
    install()
    for _ in range(2):  # the second instance is served from what the first taught
        visitor = make()
        cst.parse_module("f(x)\ny\n").visit(visitor)
        assert visitor.seen == seen
