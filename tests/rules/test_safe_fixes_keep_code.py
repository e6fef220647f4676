"""No safe fix deletes code: the statements of a program survive every safe fix.

A safe fix keeps what the program does; deleting a statement (a branch taken "never" on the
target, the code after an early exit) is a claim about the whole program no rule can check
from one file. Imports are left out of the count (an import the port no longer needs may go),
and so is ``pass`` (a placeholder a fix may add or drop). Two tables: every rule's safe INVALID
examples, fixed afresh here (not their written expectations), and every fixture pair's safe
outputs (the neuron and accelerator variants).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from cuda2neuron.core import Config, Invalid, Settings
from cuda2neuron.kinds import catalog
from cuda2neuron.workspace import fix_source

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "pairs"
_IGNORED = (ast.Import, ast.ImportFrom, ast.Pass)


def statements(source: str) -> Counter[str]:
    """How many statements of each kind the source has: what a deletion would lower."""
    tree = ast.parse(source)
    out: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, _IGNORED):
            out[type(node).__name__] += 1
    return out


def _lost(before: str, after: str) -> Counter[str]:
    return statements(before) - statements(after)


def _example_cases():
    for code, rule in catalog().items():
        for i, ex in enumerate(rule.INVALID):
            if isinstance(ex, Invalid) and ex.expected is not None and not ex.unsafe and ex.path.endswith(".py"):
                yield pytest.param(code, ex, id=f"{code}-{rule.name}-{i}")


@pytest.mark.parametrize(("code", "example"), list(_example_cases()))
def test_safe_fix_of_an_example_deletes_no_statement(code, example):
    settings = replace(Settings(target=example.target), **dict(example.options))
    fixed, _ = fix_source(example.source, example.path, Config(select=(code,), settings=settings))
    assert not _lost(example.source, fixed), f"{code}'s safe fix deleted statements:\n{fixed}"


def _pair_cases():
    for source in sorted(PAIRS.rglob("*.in.py")):
        stem = source.name[: -len(".in.py")]
        for variant in ("", ".accelerator"):
            out = source.with_name(f"{stem}{variant}.out.py")
            if out.exists():
                yield pytest.param(source, out, id=str(out.relative_to(PAIRS)))


@pytest.mark.parametrize(("source", "output"), list(_pair_cases()))
def test_safe_fixture_output_deletes_no_statement(source, output):
    lost = _lost(source.read_text(encoding="utf-8"), output.read_text(encoding="utf-8"))
    assert not lost, f"{output.name} lost {dict(lost)}"


@pytest.mark.parametrize(
    ("before", "after", "lost"),
    [
        pytest.param("if c:\n    f()\ng()\n", "g()\n", {"If": 1, "Expr": 1}, id="a-removed-branch-is-seen"),
        pytest.param("import torch\nx = 1\n", "x = 1\n", {}, id="an-import-may-go"),
        pytest.param("x = 1\n", "x = 2\n", {}, id="a-changed-statement-is-no-loss"),
    ],
)
def test_the_count_sees_deletions(before, after, lost):
    assert dict(_lost(before, after)) == lost
