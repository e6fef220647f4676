"""A device test reported without an applied fix holds the fixes in the code it selects
(``Rule.report(holds=...)``, python/_lint.py ``_hold``): the test and its branch stay one CUDA
path, or move together."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.core import Rule, Safety, Settings
from cuda2neuron.python import fix_module

from cuda2neuron.rules._shared.selected import selected_code


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
        holds = selected_code(self.context.ancestors, node)
        self.report(node, "test", replacement=replacement, safety=safety, holds=holds)


class _Moves(Rule):
    """Test rule: a call of `cuda_api()` becomes `neuron_api()`, safely."""

    abstract = True
    code, name, triggers = "CN989", "held-move", ("held_probe_api",)
    fixes = frozenset({Safety.SAFE})

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "cuda_api":
            self.report(node, "move", replacement=cst.Name("neuron_api"))


def _fix(source: str, unsafe: bool = False) -> str:
    return fix_module(cst.parse_module(source), [_Tests, _Moves], "t.py", Settings(), unsafe=unsafe).module.code


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
        pytest.param(
            'x = cuda_api() if dev == "u" else 0\n', False, 'x = cuda_api() if dev == "u" else 0\n', id="conditional-expression",
        ),
        pytest.param('if dev == "u":\n    pass\ncuda_api()\n', False, 'if dev == "u":\n    pass\nneuron_api()\n', id="after-the-if"),
        pytest.param(
            'if dev == "u":\n    if dev == "c":\n        cuda_api()\n', False, 'if dev == "u":\n    if dev == "c":\n        cuda_api()\n',
            id="nested-test-held-holds-in-turn",
        ),
        pytest.param('assert dev == "u"\ncuda_api()\n', False, 'assert dev == "u"\nneuron_api()\n', id="no-branch-no-hold"),
    ],
)
def test_a_test_without_its_fix_holds_the_code_it_selects(source, unsafe, expected):
    assert _fix(source, unsafe) == expected


def test_a_held_fix_says_why_and_takes_the_tests_safety():
    outcome = fix_module(cst.parse_module('if dev == "u":\n    cuda_api()\n'), [_Tests, _Moves], "t.py", Settings())
    held = [f for f in outcome.remaining if f.code == "CN989"]
    assert len(held) == 1
    assert held[0].fix is not None and held[0].fix.safety is Safety.UNSAFE
    assert "moves together with that test" in held[0].guidance
