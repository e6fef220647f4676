"""The rule reference page (docs/rules.md) and the address of one rule's entry in it.

SARIF's ``helpUri`` and the HTML report link each finding to its rule's entry. The page is
generated from the catalog (a test keeps docs/rules.md equal to ``rules_reference``), so the
anchors are the rule codes, lower-cased.
"""

from __future__ import annotations

import functools

__all__ = ["RULES_DOC", "fix_kind", "rule_anchor", "rule_help_uri", "rules_doc_uri", "rules_reference", "rules_table"]

# Where the page lives in the repository.
RULES_DOC = "docs/rules.md"
# The Project-URL label in pyproject's [project.urls] that names the published page. Trap: a
# file:// address of this checkout (what an editable install once fell back to) is dead on
# GitHub's code scanning page and leaks a local path into every uploaded SARIF: a link is a
# public URL or nothing.
_URL_LABEL = "Rules"
# Where the page lies in a repository hosted there, from its Repository URL (metadata written
# before the Rules URL existed).
_FORGES = ("https://github.com/", "https://gitlab.com/")


def rule_anchor(code: str) -> str:
    return code.lower()


@functools.cache
def rules_doc_uri() -> str | None:
    """The published page's URL, from the package's Project-URLs; None when it has none."""
    from importlib import metadata  # ~15 ms: only the formats that link to rules need it

    try:
        urls = metadata.metadata("cuda2neuron").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        urls = []
    labelled = {}
    for entry in urls:
        label, _, url = entry.partition(",")
        labelled.setdefault(label.strip(), url.strip())
    if labelled.get(_URL_LABEL, "").startswith("https://"):
        return labelled[_URL_LABEL]
    repo = labelled.get("Repository", "").rstrip("/")
    if repo.startswith(_FORGES) and repo.count("/") == 4:  # https://host/owner/name
        return f"{repo}/blob/main/{RULES_DOC}"
    return None


def rule_help_uri(code: str) -> str | None:
    base = rules_doc_uri()
    return None if base is None else f"{base}#{rule_anchor(code)}"


def fix_kind(rule: type) -> str:
    """The fixes the rule declares it can offer, safest first ("report" when it only reports)."""
    from cuda2neuron.core import Safety

    order = (Safety.SAFE, Safety.UNSAFE, Safety.DISPLAY_ONLY)
    return "/".join(s.value for s in order if s in getattr(rule, "fixes", ())) or "report"


def rules_table(rules: dict[str, type]) -> str:
    """The table of every rule: code, name, fix, what it does (`rules --output-format markdown`)."""
    lines = ["| code | name | fix | what it does |", "|---|---|---|---|"]
    for c, r in rules.items():
        lines.append(f"| [{c}](#{rule_anchor(c)}) | `{r.name}` | {fix_kind(r)} | {r.summary().replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


def rules_reference(rules: dict[str, type]) -> str:
    """docs/rules.md: the table of every rule, then one anchored entry per rule (code, name,
    fixes, what it does).

    The full documentation of a rule is in SARIF's ``help`` and in ``cuda2neuron rules CODE``;
    this page holds the summary, so a rule's prose can change without it.
    """
    out = [
        "# Rule reference",
        "",
        "Generated from the rule catalog; `pytest tests/test_readme.py --update-fixtures` rewrites it",
        "and the test keeps it in sync. SARIF `helpUri` and the HTML report link to the anchors here;",
        "`cuda2neuron rules CODE` prints a rule's full documentation (why, examples, fix safety).",
        "",
        "## All rules",
        "",
        rules_table(rules),
    ]
    for code, rule in rules.items():
        fixes = "/".join(sorted(s.value for s in getattr(rule, "fixes", ()))) or "report only"
        out += [f'<a id="{rule_anchor(code)}"></a>', "", f"## {code} `{rule.name}`", "", f"Fix: {fixes}.", "", rule.summary(), ""]
        # A rule that reads a data table shows its rows and their sources here (`reference`).
        if getattr(rule, "reference", ""):
            out += [rule.reference.rstrip(), ""]
    return "\n".join(out).rstrip() + "\n"
