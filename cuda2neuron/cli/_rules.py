"""`cuda2neuron rules [CODE]`: the catalog, or one rule's documentation."""

from __future__ import annotations

import json

import click
from rich.markdown import Markdown
from rich.table import Table

from cuda2neuron.core import Safety
from cuda2neuron.kinds import catalog

from ._common import EXIT_CLEAN, UsageError, out_console

__all__ = ["catalog_markdown", "rules_command"]


_SAFETY_ORDER = (Safety.SAFE, Safety.UNSAFE, Safety.DISPLAY_ONLY)


def _fix_kind(rule) -> str:
    """The fixes the rule declares it can offer ("report" when it only reports)."""
    return "/".join(s.value for s in _SAFETY_ORDER if s in rule.fixes) or "report"


def catalog_markdown(rules) -> str:
    """The rule table for README.md (a test keeps the README in sync with the catalog)."""
    lines = ["| code | name | fix | what it does |", "|---|---|---|---|"]
    for c, r in rules.items():
        lines.append(f"| {c} | `{r.name}` | {_fix_kind(r)} | {r.summary().replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


@click.command("rules")
@click.argument("code", required=False)
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def rules_command(code, output_format):
    """List the rule catalog, or show the documentation of rule CODE (or name)."""
    rules = catalog()
    if code:
        matches = [r for c, r in rules.items() if c == code.upper() or r.name == code]
        if not matches:
            raise UsageError(f"no rule {code!r}; run `cuda2neuron rules` for the list")
        rule = matches[0]
        if output_format == "json":
            out_console.file.write(json.dumps({"code": rule.code, "name": rule.name, "docs": rule.docs()}, indent=2) + "\n")
        else:
            out_console.print(f"[bold]{rule.code}[/] {rule.name}")
            out_console.print(Markdown(rule.docs()))
        return EXIT_CLEAN
    if output_format == "markdown":
        out_console.file.write(catalog_markdown(rules))
        return EXIT_CLEAN
    if output_format == "json":
        data = [{"code": c, "name": r.name, "summary": r.summary(), "fix": _fix_kind(r)} for c, r in rules.items()]
        out_console.file.write(json.dumps(data, indent=2) + "\n")
        return EXIT_CLEAN
    table = Table(show_edge=False)
    table.add_column("code")
    table.add_column("name")
    table.add_column("fix")
    table.add_column("what it does", overflow="fold")
    for c, r in rules.items():
        table.add_row(c, r.name, _fix_kind(r), r.summary())
    out_console.print(table)
    return EXIT_CLEAN
