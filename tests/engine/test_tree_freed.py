"""A processed module is freed by reference counting, not left to the cyclic garbage collector.

The Python kind turns the cyclic collector off while it processes a file. Anything that ties the
parsed tree into a reference cycle (a report naming its rule, the rule holding its reports and its
context) keeps the whole tree alive until a collection finds it, and that collection then walks
every node of it. The whole catalog runs here on every fixture pair's input, linted and fixed.
(libcst's own scope analysis, run when a fix leaves an import unused, builds cycles of its own:
with fixes on, only the engine's objects are checked.)
"""

from __future__ import annotations

import gc
from pathlib import Path

import libcst as cst
import pytest

from cuda2neuron.core import Report, Rule, Settings
from cuda2neuron.kinds import catalog
from cuda2neuron.python import RuleContext, fix_module, lint_module

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "pairs"
SOURCES = sorted(PAIRS.rglob("*.in.py"))


def _python_rules():
    return tuple(r for r in catalog().values() if "python" in r.file_kinds)


@pytest.mark.parametrize("fix", [False, True], ids=["lint", "fix"])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.relative_to(PAIRS).as_posix())
def test_module_freed_without_the_cycle_collector(source: Path, fix: bool) -> None:
    rules = _python_rules()
    enabled, debug = gc.isenabled(), gc.get_debug()
    gc.disable()
    # Everything alive now is set aside, so the collections below walk only what this test made:
    # a full collection walks the whole heap (torch and every test module loaded in this worker),
    # ~0.35 s each, twice per case. Garbage older than the test is frozen with it, never reported.
    gc.freeze()
    try:
        module = cst.parse_module(source.read_bytes())
        if fix:
            outcome = fix_module(module, rules, str(source), Settings(), source=module.code)
            findings = outcome.applied + outcome.remaining
            del outcome
        else:
            findings = lint_module(module, rules, str(source), Settings(), module.code)
        del module
        assert findings, "a fixture pair whose input no rule reports on proves nothing here"
        # What only the cycle collector would free: kept in gc.garbage for a look.
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        held = (Rule, Report, RuleContext) if fix else (Rule, Report, RuleContext, cst.CSTNode)
        left = sorted({type(o).__name__ for o in gc.garbage if isinstance(o, held)})
        assert not left, f"the parsed tree outlived its processing, held by a reference cycle: {left[:5]}"
    finally:
        gc.set_debug(debug)
        gc.garbage.clear()
        gc.unfreeze()
        if enabled:
            gc.enable()
