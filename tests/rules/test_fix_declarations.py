"""``Rule.fixes`` declares every kind of fix a rule's examples apply; a rule that under-declares
is a ``RuleDefinitionError`` when its class is created."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Invalid, Rule, RuleDefinitionError, Safety, Valid, example_fix_safeties
from cuda2neuron.kinds import catalog

_DOC = """
    ## What it does
    Test rule.

    ## Why is this bad?
    Test rule.

    ## Example
    Test rule.

    ## Fix safety
    Test rule.
    """


@pytest.mark.parametrize("rule", list(catalog().values()), ids=lambda r: f"{r.code}-{r.name}")
def test_catalog_declares_the_fixes_its_examples_apply(rule: type[Rule]):
    assert example_fix_safeties(rule) <= rule.fixes


# (id, declared fixes, INVALID examples); each declaration misses a fix the examples apply.
MISMATCHES = [
    ("report-only-rule-with-a-safe-fix", frozenset(), (Invalid("x = 1\n", "x = 2\n"),)),
    ("safe-only-rule-with-an-unsafe-fix", frozenset({Safety.SAFE}), (Invalid("x = 1\n", "x = 2\n", unsafe=True),)),
    (
        "unsafe-only-rule-with-a-safe-fix",
        frozenset({Safety.UNSAFE}),
        (Invalid("x = 1\n", "x = 2\n", unsafe=True), Invalid("y = 1\n", "y = 2\n")),
    ),
]


@pytest.mark.parametrize(("fixes", "invalid"), [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_a_rule_that_under_declares_its_fixes_is_rejected(fixes, invalid):
    with pytest.raises(RuleDefinitionError, match="does not declare"):
        type(
            "UnderDeclared",
            (Rule,),
            {
                "__doc__": _DOC,
                "__module__": __name__,
                "code": "CN999",
                "name": "under-declared",
                "triggers": ("x",),
                "fixes": fixes,
                "VALID": (Valid("z = 1\n"),),
                "INVALID": invalid,
            },
        )
