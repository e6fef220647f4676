"""``rules._shared.blocks.statements``: every statement by its blocks, never an expression."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.rules._shared.blocks import statements


def _names(source: str) -> list[str]:
    found = []
    for node in statements(cst.parse_module(source)):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            found.append(node.name.value)
        elif isinstance(node, cst.Import):
            found.append("import " + ", ".join(cst.Module([]).code_for_node(a.name) for a in node.names))
    return sorted(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("def f():\n    def g():\n        pass\n", ["f", "g"], id="nested-def"),
        pytest.param("if a:\n    pass\nelif b:\n    def h():\n        pass\nelse:\n    import os\n", ["h", "import os"], id="elif-else"),
        pytest.param(
            "try:\n    import x\nexcept ImportError:\n    import y\nfinally:\n    def z():\n        pass\n",
            ["import x", "import y", "z"],
            id="try-parts",
        ),
        pytest.param("if ok: import fast\n", ["import fast"], id="one-line-suite"),
        pytest.param("class C:\n    def m(self):\n        pass\n", ["C", "m"], id="method"),
        pytest.param("match v:\n    case 1:\n        import one\n", ["import one"], id="match-case"),
        pytest.param("f = lambda: __import__('x')\nx = [y for y in z]\n", [], id="expressions-not-entered"),
    ],
)
def test_statements(source, expected):
    assert _names(source) == expected
