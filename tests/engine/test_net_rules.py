"""A safety-net rule (``Rule.net``) speaks only where no other rule reports the same statement."""

from __future__ import annotations

from dataclasses import replace

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


# The same filter on the detectors' findings (h42n, issue 42: python/_ast_nets.py): each test rule
# above with a detector on CPython's ``ast`` that reports what its visitor reports, in walk order;
# the engine's `_detected` must then drop exactly the net findings `lint_module` drops.
def _ast_findings(rule: type[Rule], file, wanted) -> list:  # noqa: ANN001 - python.AstFile
    import ast

    from cuda2neuron.core import Effort, Finding

    nodes = sorted((n for n in ast.walk(file.tree) if wanted(n, file)), key=lambda n: (n.lineno, n.col_offset))
    return [
        Finding(code=rule.code, name=rule.name, message=m, path=file.path, span=file.span(n), guidance="", effort=Effort.LOW)
        for n in nodes
        for m in [rule.__name__ and _MESSAGES[rule.code]]
    ]


_MESSAGES = {"CN993": "x", "CN994": "f", "CN995": "if"}


class _EveryNameDetected(_EveryName):
    abstract = True

    @classmethod
    def detect(cls, file, settings):  # noqa: ANN001, ANN206
        import ast

        return _ast_findings(cls, file, lambda n, f: isinstance(n, ast.Name) and n.id == "x")


class _CallsDetected(_Calls):
    abstract = True

    @classmethod
    def detect(cls, file, settings):  # noqa: ANN001, ANN206
        import ast

        return _ast_findings(cls, file, lambda n, f: isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "f")


class _IfsDetected(_Ifs):
    abstract = True

    @classmethod
    def detect(cls, file, settings):  # noqa: ANN001, ANN206
        import ast

        from cuda2neuron.core import Span

        found = _ast_findings(cls, file, lambda n, f: isinstance(n, ast.If) and "g(" in (ast.get_source_segment(f.text, n.test) or ""))
        ifs = sorted((n for n in ast.walk(file.tree) if isinstance(n, ast.If) and "g(" in (ast.get_source_segment(file.text, n.test) or "")), key=lambda n: n.lineno)
        # libcst's span of a compound statement runs to the start of the next line: located as
        # a real detector would locate it, the node registered for the span it gives.
        spans = [Span(n.lineno, n.col_offset, n.end_lineno + 1, 0) for n in ifs]
        for n, span in zip(ifs, spans):
            file.spanned.setdefault(span, []).append(n)
        return [replace(f, span=span) for f, span in zip(found, spans)]


_DETECTED = [_EveryNameDetected, _CallsDetected, _IfsDetected]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("y = f(x)\n", id="inside-another-report"),
        pytest.param("y = f(1) + x\n", id="same-statement-elsewhere"),
        pytest.param("y = f(1)\nz = x\n", id="other-statement-stays"),
        pytest.param("if g():\n    z = x\n", id="inside-a-reported-block"),
        pytest.param("if g():\n    pass\nelif x:\n    pass\n", id="elif-inside-a-reported-if"),
        pytest.param("if x:\n    f(1)\n", id="if-test-is-not-its-body"),
        pytest.param("z = x\n", id="alone"),
        pytest.param("z = [x,\n     x]\n", id="once-per-unit"),
        pytest.param("z = x; f(1)\n", id="small-statements-apart"),
        pytest.param("f(1)\nz = x  # cuda2neuron: ignore[CN994]\n", id="suppressed-elsewhere"),
        pytest.param("z = f(1) or x  # cuda2neuron: ignore[CN994]\n", id="suppressed-other-still-silences"),
        pytest.param("with (f(1), open(x)):\n    pass\n", id="with-items-apart"),
        pytest.param("with f(x):\n    pass\n", id="same-with-item"),
        pytest.param("@f(1)\n@deco(x)\ndef h():\n    pass\n", id="decorators-apart"),
        pytest.param("@deco(x)\ndef h(a=f(1)):\n    return x\n", id="decorator-signature-body-apart"),
        pytest.param("class A(f(1)):\n    z = x\n", id="class-header-not-its-body"),
    ],
)
def test_net_filter_on_detector_findings(source):
    from cuda2neuron.core import Config, RunOptions
    from cuda2neuron.kinds._python import _detected

    detected = _detected("t.py", source.encode(), Config(settings=Settings()), RunOptions(), tuple(_DETECTED))
    linted = lint_module(cst.parse_module(source), _DETECTED, "t.py", Settings(), source)
    assert detected is not None
    assert detected == linted


def test_net_filter_unsure_where_a_finding_names_no_node():
    """A finding whose span no node of the walk was located by: the filter cannot place it."""
    from cuda2neuron.core import Config, Effort, Finding, RunOptions, Span
    from cuda2neuron.kinds._python import _detected

    class _Nowhere(_CallsDetected):
        abstract = True

        @classmethod
        def detect(cls, file, settings):  # noqa: ANN001, ANN206
            return [Finding(code=cls.code, name=cls.name, message="f", path=file.path, span=Span(1, 0, 1, 1), guidance="", effort=Effort.LOW)]

    source = "z = x\n"
    assert _detected("t.py", source.encode(), Config(settings=Settings()), RunOptions(), (_EveryNameDetected, _Nowhere)) is None
