"""Python sources: the libcst walk, name resolution, positions, rebuilding and the fixed point.

Everything here sits on libcst, which costs about a quarter of a second to import; most files a
run sees are never parsed (the kinds' prefilter drops them first), so the names below load on
first use (PEP 562) and ``import cuda2neuron.python`` alone costs nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._ast_nets import net_filtered
    from ._ast_walk import ArgNode, AstFile, AstWalk, KeywordName, Unsure, generated_text, record_edit, walk_ast, written_bounds
    from ._ast_fences import Fence, outside_fences, record_fence
    from ._branches import after_exit, opened_code, selected_code
    from ._context import RuleContext
    from ._device_truth import Truth, asks_cuda, truth
    from ._lint import NET_UNITS, FixOutcome, fix_module, lint_module, net_unit
    from ._names import bind_import, bind_target, dotted_name
    from ._scopes import LOCAL, Scope
    from ._positions import spans_and_code
    from ._rebuild import rebuild
    from ._source import parse_bytes
    from ._walk import visit_syntax, walk_rules

__all__ = [
    "ArgNode",
    "AstFile",
    "AstWalk",
    "KeywordName",
    "Unsure",
    "generated_text",
    "record_edit",
    "walk_ast",
    "written_bounds",
    "net_filtered",
    "Fence",
    "outside_fences",
    "record_fence",
    "LOCAL",
    "NET_UNITS",
    "FixOutcome",
    "RuleContext",
    "Scope",
    "Truth",
    "after_exit",
    "asks_cuda",
    "bind_import",
    "bind_target",
    "dotted_name",
    "fix_module",
    "lint_module",
    "net_unit",
    "opened_code",
    "parse_bytes",
    "rebuild",
    "selected_code",
    "spans_and_code",
    "truth",
    "visit_syntax",
    "walk_rules",
]

_HOME = {
    "ArgNode": "_ast_walk",
    "AstFile": "_ast_walk",
    "AstWalk": "_ast_walk",
    "KeywordName": "_ast_walk",
    "Unsure": "_ast_walk",
    "generated_text": "_ast_walk",
    "record_edit": "_ast_walk",
    "written_bounds": "_ast_walk",
    "walk_ast": "_ast_walk",
    "net_filtered": "_ast_nets",
    "Fence": "_ast_fences",
    "outside_fences": "_ast_fences",
    "record_fence": "_ast_fences",
    "RuleContext": "_context",
    "Truth": "_device_truth",
    "asks_cuda": "_device_truth",
    "truth": "_device_truth",
    "after_exit": "_branches",
    "opened_code": "_branches",
    "selected_code": "_branches",
    "FixOutcome": "_lint",
    "NET_UNITS": "_lint",
    "fix_module": "_lint",
    "lint_module": "_lint",
    "net_unit": "_lint",
    "LOCAL": "_scopes",
    "Scope": "_scopes",
    "bind_import": "_names",
    "bind_target": "_names",
    "dotted_name": "_names",
    "spans_and_code": "_positions",
    "rebuild": "_rebuild",
    "parse_bytes": "_source",
    "visit_syntax": "_walk",
    "walk_rules": "_walk",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
