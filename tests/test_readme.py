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
