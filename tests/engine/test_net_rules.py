"""A safety-net rule (``Rule.net``) speaks only where no other rule reports the same statement."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.core import Rule, Settings
from cuda2neuron.python import lint_module


class _EveryName(Rule):
    """Test net: every name ``x``."""

    abstract = True
    # Triggers are admitted as coarse words for every test in the process: kept unlikely.
    code, name, triggers = "CN993", "every-x", ("net_probe_x",)
    net = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "x":
            self.report(node, "x")


class _Calls(Rule):
    """Test rule: calls of ``f``, reported at the call."""

    abstract = True
    code, name, triggers = "CN994", "calls-of-f", ("net_probe_f",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "f":
            self.report(node, "f")


class _Ifs(Rule):
    """Test rule: every ``if`` whose test calls ``g``, reported at the whole ``if``."""

    abstract = True
    code, name, triggers = "CN995", "ifs-on-g", ("net_probe_g",)

    def visit_If(self, node: cst.If) -> None:
        if "g(" in cst.Module([]).code_for_node(node.test):
            self.report(node, "if")


def _lines(source: str, rules) -> list[tuple[str, int]]:
    findings = lint_module(cst.parse_module(source), rules, "t.py", Settings())
    return [(f.code, f.span.start_line) for f in findings]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("y = f(x)\n", [("CN994", 1)], id="inside-another-report"),
        pytest.param("y = f(1) + x\n", [("CN994", 1)], id="same-statement-elsewhere"),
        pytest.param("y = f(1)\nz = x\n", [("CN994", 1), ("CN993", 2)], id="other-statement-stays"),
        pytest.param("if g():\n    z = x\n", [("CN995", 1)], id="inside-a-reported-block"),
        pytest.param("if x:\n    f(1)\n", [("CN993", 1), ("CN994", 2)], id="if-test-is-not-its-body"),
        pytest.param("z = x\n", [("CN993", 1)], id="alone"),
        pytest.param("z = [x,\n     x]\n", [("CN993", 1)], id="once-per-unit"),
        pytest.param("with (f(1), open(x)):\n    pass\n", [("CN994", 1), ("CN993", 1)], id="with-items-apart"),
        pytest.param("with f(x):\n    pass\n", [("CN994", 1)], id="same-with-item"),
        pytest.param("@f(1)\n@deco(x)\ndef h():\n    pass\n", [("CN994", 1), ("CN993", 2)], id="decorators-apart"),
    ],
)
def test_net_reports_only_what_others_leave(source, expected):
    assert sorted(_lines(source, [_EveryName, _Calls, _Ifs]), key=lambda p: (p[1], p[0])) == sorted(
        expected, key=lambda p: (p[1], p[0])
    )


def test_without_other_rules_the_net_reports_everything():
    assert _lines("y = f(x)\n", [_EveryName]) == [("CN993", 1)]
