"""`cuda2neuron rules [CODE]`: the catalog, or one rule's documentation."""

from __future__ import annotations

import json
import re

import click
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from cuda2neuron.kinds import catalog

from ._common import EXIT_CLEAN, UsageError, out_console

__all__ = ["catalog_markdown", "rules_command"]


def _fix_kind(rule) -> str:
    """The fixes the rule declares it can offer ("report" when it only reports)."""
    from cuda2neuron.report import fix_kind

    return fix_kind(rule)


_RST_CODE = re.compile(r"``(.+?)``")


def plain(text: str) -> str:
    """reST code spans (``x``, as the docstrings write them) as Markdown's `x` for people."""
    return _RST_CODE.sub(r"`\1`", text)


def catalog_markdown(rules) -> str:
    """The rule table of docs/rules.md (a test keeps the page in sync with the catalog)."""
    from cuda2neuron.report import rules_table

    return rules_table(rules)


_HELP = """List the rule catalog, a family of it (CN3), or one rule's documentation (code or name).

\b
Examples:
  cuda2neuron rules                        every rule: code, name, fix kind, what it does
  cuda2neuron rules CN3                    the amp family (CN3xx)
  cuda2neuron rules CN101                  one rule's documentation
  cuda2neuron rules cuda-method-call       the same, by name
  cuda2neuron rules --output-format json   the catalog for tools
"""


@click.command("rules", help=_HELP)
@click.argument("code", required=False)
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True, help="How the catalog is written.")
def rules_command(code, output_format):
    rules = catalog()
    if code:
        wanted = code.upper()
        matches = [r for c, r in rules.items() if c == wanted or r.name == code]
        if not matches:
            family = {c: r for c, r in rules.items() if re.fullmatch(r"CN\d{1,2}", wanted) and c.startswith(wanted)}
            if not family:
                raise UsageError(f"{code}: no such rule or family; `cuda2neuron rules` lists them")
            return _list(family, output_format)
        rule = matches[0]
        if output_format == "json":
            out_console.file.write(json.dumps({"code": rule.code, "name": rule.name, "docs": rule.docs()}, indent=2) + "\n")
        else:
            out_console.print(f"[bold]{rule.code}[/] {rule.name}")
            out_console.print(Markdown(rule.docs()))
        return EXIT_CLEAN
    return _list(rules, output_format)


def _list(rules, output_format: str) -> int:
    if output_format == "markdown":
        out_console.file.write(catalog_markdown(rules))
        return EXIT_CLEAN
    if output_format == "json":
        data = [{"code": c, "name": r.name, "summary": plain(r.summary()), "fix": _fix_kind(r)} for c, r in rules.items()]
        out_console.file.write(json.dumps(data, indent=2) + "\n")
        return EXIT_CLEAN
    table = Table(show_edge=False)
    table.add_column("code", no_wrap=True)
    table.add_column("name", no_wrap=True)
    table.add_column("fix", no_wrap=True)
    table.add_column("what it does", overflow="fold")
    for c, r in rules.items():
        table.add_row(c, r.name, _fix_kind(r), escape(plain(r.summary())))
    out_console.print(table)
    return EXIT_CLEAN
