"""The README's rule table is generated from the catalog and must not drift."""

from __future__ import annotations

from pathlib import Path

from cuda2neuron.cli._rules import catalog_markdown
from cuda2neuron.kinds import catalog

README = Path(__file__).resolve().parents[1] / "README.md"


def test_rule_table_matches_catalog():
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- rules:start -->\n", 1)[1].split("<!-- rules:end -->", 1)[0]
    assert block == catalog_markdown(catalog())


RULES_PAGE = README.parent / "docs" / "rules.md"


def test_rules_page_matches_catalog(request):
    """docs/rules.md (SARIF's helpUri and the HTML report link to it) is generated from the
    catalog; `pytest tests/test_readme.py --update-fixtures` rewrites it."""
    from cuda2neuron.report import rules_reference

    expected = rules_reference(catalog())
    if request.config.getoption("--update-fixtures"):
        RULES_PAGE.write_text(expected, encoding="utf-8")
    assert RULES_PAGE.read_text(encoding="utf-8") == expected, (
        "docs/rules.md is out of date: run `pytest tests/test_readme.py --update-fixtures`"
    )
    for code, rule in catalog().items():
        assert expected.count(f'<a id="{code.lower()}"></a>') == 1 and f"## {code} `{rule.name}`" in expected


def test_effort_scale_is_the_one_the_readme_defines():
    from cuda2neuron.report import EFFORT_POINTS, EFFORT_SCALE

    text = README.read_text(encoding="utf-8").split("## Coverage and effort", 1)[1].split("\n## ", 1)[0]
    for effort, points in EFFORT_POINTS.items():
        assert f"| {effort.value} | {points} |" in text
    for level, span in EFFORT_SCALE.items():
        if level != "none":
            assert f"**{level}** (" in text and span in text
