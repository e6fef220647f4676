"""visit_syntax sees what libcst's visit sees, in the same order (the kernel index asks for the
*first* CUDA-only call under a node), without libcst's rebuilding of every node."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.python import visit_syntax


class _Recorder(cst.CSTVisitor):
    """Every Call and Name entered and left; Lambda's children skipped (a False visit)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.events.append(("call", cst.Module([]).code_for_node(node.func)))

    def leave_Call(self, original_node: cst.Call) -> None:
        self.events.append(("left", cst.Module([]).code_for_node(original_node.func)))

    def visit_Name(self, node: cst.Name) -> None:
        self.events.append(("name", node.value))

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.events.append(("lambda", ""))
        return False


SOURCES = [
    pytest.param("@deco(a())\ndef f(x=d(), *, y: t() = e()) -> r():\n    return body()\n", id="function-decorators-first"),
    pytest.param("@deco(a())\nclass C(base(), metaclass=m()):\n    x = body()\n", id="class-decorators-first"),
    pytest.param("y = body() if test() else orelse()\n", id="if-expression-body-first"),
    pytest.param("try:\n    a()\nexcept kind() as e:\n    b()\n", id="except-type-first"),
    pytest.param("f(key=value(), *rest(), **more())\n", id="keyword-arguments"),
    pytest.param("def f(a=p(), /, b=q(), *c, d=r(), **e):\n    pass\n", id="parameter-groups"),
    pytest.param("match x:\n    case [a] if guard():\n        body()\n", id="match-guard-before-body"),
    pytest.param("g = lambda: inner()\nafter()\n", id="false-skips-children"),
    pytest.param("s = f'{fmt():>{width()}}'\nt = [c() for c in cs() if ok(c)]\n", id="f-string-and-comprehension"),
    pytest.param("import a.b as c\nfrom .m import (n as o)\nx.y.z(w)  # a comment\n", id="imports-and-attributes"),
]


@pytest.mark.parametrize("source", SOURCES)
def test_visit_syntax_matches_libcst_visit(source):
    module = cst.parse_module(source)
    ours, theirs = _Recorder(), _Recorder()
    visit_syntax(module, ours)
    module.visit(theirs)
    assert ours.events, "the table's sources all hold calls and names"
    assert ours.events == theirs.events
