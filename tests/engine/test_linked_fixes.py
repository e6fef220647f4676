"""Linked fixes (``Rule.report(depends=..., needs=...)``, python/_groups.py): a device test and
the code it selects move together at the weakest safety among them, or stay together, whichever
side cannot move; a test that reaches its branch through an ``or`` waits for the branch, one way.

The rules below are test rules: `dev == "c"` / `"u"` / `"d"` is a device test whose fix is safe /
unsafe / report-only; `cuda_api()` moves safely, `cuda_left()` is reported without a fix,
`cuda_maybe()` moves unsafely, `precision()` is an advisory report without a fix."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.core import Rule, Safety, Settings
from cuda2neuron.python import fix_module

from cuda2neuron.rules._shared.selected import opened_code, selected_code


class _Tests(Rule):
    """Test rule: `dev == "c"` becomes `dev == "n"`, with the safety the string's name says."""

    abstract = True
    # Triggers are admitted as coarse words for every test in the process: kept unlikely.
    code, name, triggers = "CN990", "held-test", ("held_probe",)
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE, Safety.DISPLAY_ONLY})

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        safety = {'"c"': Safety.SAFE, '"u"': Safety.UNSAFE, '"d"': Safety.DISPLAY_ONLY}.get(node.value)
        if safety is None:
            return
        replacement = None if safety is Safety.DISPLAY_ONLY else cst.SimpleString('"n"')
        ancestors = self.context.ancestors
        self.report(
            node, "test", replacement=replacement, safety=safety,
            depends=selected_code(ancestors, node), needs=opened_code(ancestors, node),
        )


class _Moves(Rule):
    """Test rule: a call of `cuda_api()` becomes `neuron_api()`, safely."""

    abstract = True
    code, name, triggers = "CN989", "held-move", ("held_probe_api",)
    fixes = frozenset({Safety.SAFE})

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "cuda_api":
            self.report(node, "move", replacement=cst.Name("neuron_api"))
        elif node.value == "cuda_maybe":
            self.report(node, "maybe", replacement=cst.Name("neuron_maybe"), safety=Safety.UNSAFE)
        elif node.value == "cuda_left":
            self.report(node, "left")


class _Advice(Rule):
    """Test rule: `precision()` is reported, without a fix, by an advisory rule."""

    abstract = True
    advisory = True
    code, name, triggers = "CN988", "held-advice", ("held_probe_advice",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "precision":
            self.report(node, "advice")


def _fix(source: str, unsafe: bool = False) -> str:
    return fix_module(cst.parse_module(source), [_Tests, _Moves, _Advice], "t.py", Settings(), unsafe=unsafe).module.code


@pytest.mark.parametrize(
    ("source", "unsafe", "expected"),
    [
        pytest.param('if dev == "c":\n    cuda_api()\n', False, 'if dev == "n":\n    neuron_api()\n', id="safe-test-moves-with-its-branch"),
        pytest.param('if dev == "u":\n    cuda_api()\n', False, 'if dev == "u":\n    cuda_api()\n', id="unsafe-test-holds-its-branch"),
        pytest.param('if dev == "u":\n    cuda_api()\n', True, 'if dev == "n":\n    neuron_api()\n', id="unsafe-fixes-move-both"),
        pytest.param('if dev == "d":\n    cuda_api()\n', True, 'if dev == "d":\n    cuda_api()\n', id="display-only-holds-even-unsafe"),
        pytest.param('if dev == "u" and cuda_api():\n    pass\n', False, 'if dev == "u" and cuda_api():\n    pass\n', id="rest-of-the-test"),
        pytest.param(
            'if dev == "u":\n    pass\nelse:\n    cuda_api()\n', False, 'if dev == "u":\n    pass\nelse:\n    neuron_api()\n',
            id="else-branch-is-not-cuda",
        ),
        pytest.param(
            'if dev != "u":\n    cuda_api()\nelse:\n    cuda_api()\n', False, 'if dev != "u":\n    neuron_api()\nelse:\n    cuda_api()\n',
            id="negated-holds-the-else",
        ),
        pytest.param(
            'if not dev == "u":\n    cuda_api()\n', False, 'if not dev == "u":\n    neuron_api()\n', id="not-picks-the-else",
        ),
        pytest.param(
            'if dev == "u" or ok:\n    cuda_api()\n', False, 'if dev == "u" or ok:\n    neuron_api()\n', id="or-implies-no-branch",
        ),
        # -- the other way: the code a test selects holds the test back ---------------------
        pytest.param('if dev == "c":\n    cuda_left()\n', False, 'if dev == "c":\n    cuda_left()\n', id="report-only-branch-holds-its-test"),
        pytest.param('if dev == "c":\n    cuda_left()\n', True, 'if dev == "c":\n    cuda_left()\n', id="report-only-branch-holds-even-unsafe"),
        pytest.param(
            'if dev == "c":\n    cuda_maybe()\n    cuda_api()\n', False, 'if dev == "c":\n    cuda_maybe()\n    cuda_api()\n',
            id="unsafe-branch-holds-a-safe-test",
        ),
        pytest.param(
            'if dev == "c":\n    cuda_maybe()\n', True, 'if dev == "n":\n    neuron_maybe()\n', id="unsafe-fixes-move-test-and-branch",
        ),
        pytest.param(
            'if dev == "c":\n    if dev == "u":\n        cuda_api()\n', False, 'if dev == "c":\n    if dev == "u":\n        cuda_api()\n',
            id="inner-unsafe-test-holds-the-outer",
        ),
        pytest.param(
            'if dev == "c" and cuda_left():\n    pass\n', False, 'if dev == "c" and cuda_left():\n    pass\n', id="rest-of-the-test-holds-it",
        ),
        pytest.param(
            'if dev == "c":\n    pass\nelse:\n    cuda_left()\n', False, 'if dev == "n":\n    pass\nelse:\n    cuda_left()\n',
            id="the-other-branch-does-not-hold",
        ),
        pytest.param('if dev == "c":\n    precision()\n', False, 'if dev == "n":\n    precision()\n', id="advisory-does-not-hold"),
        # An early exit: what follows `if not cuda: return` runs on CUDA only.
        pytest.param(
            'def f():\n    if dev != "c":\n        return\n    cuda_left()\n', False,
            'def f():\n    if dev != "c":\n        return\n    cuda_left()\n', id="code-after-an-early-exit-holds-it",
        ),
        pytest.param(
            'def f():\n    if dev != "u":\n        return\n    cuda_api()\n', False,
            'def f():\n    if dev != "u":\n        return\n    cuda_api()\n', id="early-exit-holds-what-follows",
        ),
        # Through an `or` the branch runs either way: it holds the test back, not the reverse.
        pytest.param(
            'if dev == "c" or ok:\n    cuda_left()\n', False, 'if dev == "c" or ok:\n    cuda_left()\n', id="or-branch-holds-its-test",
        ),
        pytest.param(
            'if dev == "c" or ok:\n    cuda_api()\n', False, 'if dev == "n" or ok:\n    neuron_api()\n', id="or-branch-moves-with-a-safe-test",
        ),
        pytest.param(
            'x = cuda_api() if dev == "u" else 0\n', False, 'x = cuda_api() if dev == "u" else 0\n', id="conditional-expression",
        ),
        pytest.param('if dev == "u":\n    pass\ncuda_api()\n', False, 'if dev == "u":\n    pass\nneuron_api()\n', id="after-the-if"),
        pytest.param(
            'if dev == "u":\n    if dev == "c":\n        cuda_api()\n', False, 'if dev == "u":\n    if dev == "c":\n        cuda_api()\n',
            id="nested-test-held-holds-in-turn",
        ),
        pytest.param('assert dev == "u"\ncuda_api()\n', False, 'assert dev == "u"\nneuron_api()\n', id="no-branch-no-hold"),
        # -- the polarity is the device model's (python/_device_truth.py) ---------------------
        pytest.param(
            'if (dev == "u") is False:\n    cuda_api()\nelse:\n    cuda_api()\n', False,
            'if (dev == "u") is False:\n    neuron_api()\nelse:\n    cuda_api()\n', id="is-false-picks-the-else",
        ),
        pytest.param(
            'if HAVE_TRITON or dev == "u":\n    cuda_api()\n', False, 'if HAVE_TRITON or dev == "u":\n    cuda_api()\n',
            id="or-with-a-cuda-only-package-flag-still-selects",
        ),
        pytest.param(
            'x = not (dev == "u" and ok) or cuda_api()\n', False, 'x = not (dev == "u" and ok) or cuda_api()\n',
            id="short-circuit-through-not",
        ),
        # An early exit inside a `try` body: what follows the `try` runs on CUDA only as well.
        pytest.param(
            'def f():\n    try:\n        if dev != "c":\n            return\n    except E:\n        return\n    cuda_left()\n', False,
            'def f():\n    try:\n        if dev != "c":\n            return\n    except E:\n        return\n    cuda_left()\n',
            id="early-exit-in-a-try-holds-what-follows-it",
        ),
        pytest.param(
            'def f():\n    with lock:\n        if dev != "c":\n            return\n    cuda_left()\n', False,
            'def f():\n    with lock:\n        if dev != "c":\n            return\n    cuda_left()\n',
            id="early-exit-in-a-with-holds-what-follows-it",
        ),
        pytest.param(
            'def f():\n    if ok:\n        if dev != "c":\n            return\n    cuda_left()\n', False,
            'def f():\n    if ok:\n        if dev != "n":\n            return\n    cuda_left()\n',
            id="early-exit-in-a-branch-does-not-reach-past-it",
        ),
    ],
)
def test_a_test_without_its_fix_holds_the_code_it_selects(source, unsafe, expected):
    assert _fix(source, unsafe) == expected


def test_a_held_fix_says_why_and_takes_the_tests_safety():
    outcome = fix_module(cst.parse_module('if dev == "u":\n    cuda_api()\n'), [_Tests, _Moves], "t.py", Settings())
    held = [f for f in outcome.remaining if f.code == "CN989"]
    assert len(held) == 1
    assert held[0].fix is not None and held[0].fix.safety is Safety.UNSAFE
    assert "goes together with" in held[0].guidance


def test_a_held_test_names_the_finding_that_holds_it():
    source = 'if dev == "c":\n    x = 1\n    cuda_left()\n'
    outcome = fix_module(cst.parse_module(source), [_Tests, _Moves], "t.py", Settings(), unsafe=True)
    (test,) = [f for f in outcome.remaining if f.code == "CN990"]
    assert test.fix is not None and test.fix.safety is Safety.DISPLAY_ONLY
    assert "CN989 at line 3" in test.guidance and "no fix" in test.guidance

