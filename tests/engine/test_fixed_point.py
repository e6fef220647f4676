"""Fixes apply outer-first, the engine loops to a fixed point, and fighting rules fail the file."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.core import Rule, Safety, Settings
from cuda2neuron.core import ConvergenceError
from cuda2neuron.python import fix_module


class _WrapCalls(Rule):
    """Test rule: f(x) -> g(x) (an outer replacement built from the original node)."""

    abstract = True  # not part of the catalog
    code, name, triggers = "CN990", "wrap", ("f",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "f":
            self.report(node, "f", replacement=node.with_changes(func=cst.Name("g")))


class _Flip(Rule):
    """Test rule that never converges: a <-> b."""

    abstract = True
    code, name, triggers = "CN991", "flip", ("a", "b")

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("a", "b"):
            self.report(node, "flip", replacement=cst.Name("b" if node.value == "a" else "a"))


class _Remove(Rule):
    """Test rule removing `drop()` statements (the engine must keep blocks non-empty)."""

    abstract = True
    code, name, triggers = "CN992", "remove", ("drop",)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if "drop()" in cst.Module([]).code_for_node(node):
            self.report(node, "drop", replacement=cst.RemovalSentinel.REMOVE, safety=Safety.UNSAFE)


def _fix(source: str, rules, unsafe: bool = False) -> str:
    return fix_module(cst.parse_module(source), rules, "t.py", Settings(), unsafe=unsafe).module.code


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("f(f(f(1)))\n", "g(g(g(1)))\n", id="nested-needs-three-rounds"),
        pytest.param("x = [f(1), f(2)]\n", "x = [g(1), g(2)]\n", id="siblings-one-round"),
    ],
)
def test_nested_fixes_converge(source, expected):
    assert _fix(source, [_WrapCalls]) == expected


def test_non_convergence_is_an_error():
    with pytest.raises(ConvergenceError):
        _fix("a\n", [_Flip])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("def f():\n    drop()\n", "def f():\n    pass\n", id="only-statement-becomes-pass"),
        pytest.param("def f():\n    x = 1\n    drop()\n", "def f():\n    x = 1\n", id="other-statements-stay"),
    ],
)
def test_statement_removal_keeps_blocks_valid(source, expected):
    assert _fix(source, [_Remove], unsafe=True) == expected


def test_unsafe_fix_needs_opt_in():
    source = "def f():\n    drop()\n"
    assert _fix(source, [_Remove], unsafe=False) == source


@pytest.mark.parametrize(
    ("code", "name", "unused"),
    [
        pytest.param("from m import sync\nx = torch.neuron.sync()\n", "sync", True, id="attribute-is-not-a-use"),
        pytest.param("from m import sync\nsync()\n", "sync", False, id="call-is-a-use"),
        pytest.param("from m import sync\nx = [sync]\n", "sync", False, id="reference-is-a-use"),
        pytest.param("from m import sync\nprint('sync')\n", "sync", False, id="string-naming-it-keeps-it"),
        pytest.param("from m import amp\nx = 'amp.autocast'\n", "amp", False, id="string-path-from-it-keeps-it"),
        pytest.param("from m import amp\nx = f'{amp.state}'\n", "amp", False, id="f-string-field-keeps-it"),
        pytest.param("from m import amp\nx = f'{y} amp'\n", "amp", True, id="f-string-text-is-not-a-use"),
        pytest.param("from m import amp\np.add_argument('--enable-amp')\n", "amp", True, id="option-name-is-not-a-use"),
        pytest.param("from m import amp\nlog('use amp here')\n", "amp", True, id="words-in-a-string-are-not-a-use"),
        pytest.param("from m import amp\nf(x='--amp', y=amp)\n", "amp", False, id="use-beside-a-string-mention"),
        pytest.param("from m import (\n    amp,\n)\nx = 1\n", "amp", False, id="continuation-line-of-an-import-safe-side"),
        pytest.param("from m import n\nenv = {'n': count()}\n", "n", True, id="dict-key-is-data-not-a-use"),
        pytest.param("from m import n\nenv = {\n    'n'\n    : 1}\n", "n", True, id="dict-key-over-lines-is-data"),
        pytest.param("from m import n\nenv = {'n', 'm'}\n", "n", False, id="set-member-naming-it-keeps-it"),
        pytest.param("from m import n\nenv = {'k': 'n'}\n", "n", False, id="dict-value-naming-it-keeps-it"),
        pytest.param("from m import n\nx = f({'k': 1}, 'n')\n", "n", False, id="string-after-a-dict-keeps-it"),
    ],
)
def test_unused_import_precheck(code, name, unused):
    from cuda2neuron.python._lint import _maybe_unused

    assert _maybe_unused(code, name) is unused


@pytest.mark.parametrize(
    ("code", "name", "unused"),
    [
        pytest.param('def f():\n    """Takes a GradScaler."""\n    from m import GradScaler\n', "GradScaler", True, id="docstring-is-prose"),
        pytest.param("from m import sync\n# sync() was here\n", "sync", True, id="comment-is-prose"),
        pytest.param('from m import sync\n"""\nsync\n"""\nx = 1\n', "sync", True, id="multiline-bare-string-is-prose"),
        pytest.param('from m import sync\n__all__ = ["sync"]\n', "sync", False, id="string-in-an-expression-keeps-it"),
        pytest.param('from m import sync\nx = getattr(m, "sync")\n', "sync", False, id="argument-string-keeps-it"),
        pytest.param('from m import sync\n"sync" in names\n', "sync", False, id="string-operand-keeps-it"),
    ],
)
def test_prose_is_not_a_use(code, name, unused):
    """The import cleanup decides from code: comments and docstrings never keep an import."""
    from cuda2neuron.python._lint import _maybe_unused, _prose_out

    assert _maybe_unused(_prose_out(code), name) is unused


_NESTED_USED_ELSEWHERE = (
    "def a():\n    from m import sync\n    return torch.neuron.sync()\n\n"
    "def b():\n    from m import sync\n    return sync\n"
)


@pytest.mark.parametrize(
    ("code", "unused"),
    [
        # a's import is unused although b still uses the name: the scope analysis may decide
        pytest.param(_NESTED_USED_ELSEWHERE, True, id="unused-in-one-function"),
        pytest.param("from m import sync\n" + _NESTED_USED_ELSEWHERE, False, id="module-level-import-too"),
        pytest.param(
            _NESTED_USED_ELSEWHERE + '\ndef c():\n    from m import sync\n    return globals()["sync"]\n',
            False,
            id="string-only-use-keeps-all",
        ),
        pytest.param("def a():\n    from m import sync\n    # sync\n    return sync()\n", False, id="used-in-its-function"),
    ],
)
def test_nested_import_unused_in_its_function(code, unused):
    from cuda2neuron.python._lint import _aliases, _unused_where_nested

    module = cst.parse_module(code)
    assert _unused_where_nested(module, _aliases(module, "m", "sync")[None], "sync") is unused


@pytest.mark.parametrize(
    ("source", "walks", "remaining"),
    [
        # Round 2's output spells no "f(": it wakes no rule, and a walk for no rule is skipped.
        pytest.param("x = f(1)\n", 1, 0, id="output-wakes-nothing-one-walk"),
        # "f(" is still written (a string the rule does not fix): round 2 walks, as before.
        pytest.param("x = f(1)\ny = 'f(2)'\n", 2, 0, id="output-still-wakes-two-walks"),
    ],
)
def test_a_round_without_rules_is_not_walked(monkeypatch, source, walks, remaining):
    import cuda2neuron.python._lint as lint

    calls = []
    real = lint.walk_rules
    monkeypatch.setattr(lint, "walk_rules", lambda *a: (calls.append(1), real(*a))[1])
    outcome = fix_module(
        cst.parse_module(source), [_WrapCalls], "t.py", Settings(), source=source,
        woken_by=lambda code: (_WrapCalls,) if "f(" in code else (),
    )
    assert (len(calls), len(outcome.applied), len(outcome.remaining)) == (walks, 1, remaining)
    assert outcome.bytes.decode() == source.replace("f(1)", "g(1)")
