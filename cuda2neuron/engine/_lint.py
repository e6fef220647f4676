"""Run rules over one module and apply their fixes to a fixed point.

Rules run batched in a single traversal (one dispatcher calls every rule's visit_/leave_ methods)
so the cost per file is one parse, one scope pre-pass and one walk, whatever the catalog size.
Positions are computed only when something was reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from ._context import RuleContext
from ._model import Finding, Fix, Safety, Span
from ._names import build_scope_index
from ._rule import Report, Rule
from ._settings import Settings
from ._suppress import Suppressions

__all__ = ["MAX_ITERATIONS", "ConvergenceError", "FixOutcome", "fix_module", "lint_module"]

# A fix built from an original node can hide an inner fix, so we re-lint after applying; real
# files converge in 2-3 rounds. Reaching the cap means two rules fight: a bug, not a result.
MAX_ITERATIONS = 10


class ConvergenceError(RuntimeError):
    pass


class _Dispatcher(cst.CSTVisitor):
    def __init__(self, rules: Sequence[Rule], context: RuleContext) -> None:
        self.context = context
        self._visit: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
        self._leave: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_") and "_" not in attr[6:]:
                    self._visit.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_") and "_" not in attr[6:]:
                    self._leave.setdefault(attr[6:], []).append(getattr(rule, attr))

    def on_visit(self, node: cst.CSTNode) -> bool:
        for method in self._visit.get(type(node).__name__, ()):
            method(node)
        self.context.ancestors.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.context.ancestors.pop()
        for method in self._leave.get(type(original_node).__name__, ()):
            method(original_node)

    # Function and lambda bodies open a scope; parameters and defaults stay in the outer one.
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if attribute == "body" and isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            self.context.enter_scope(node.body)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if attribute == "body" and isinstance(original_node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            if self.context._scopes.by_owner.get(original_node.body) is not None:
                self.context.leave_scope()


def _collect(
    module: cst.Module, rule_types: Sequence[type[Rule]], path: str, settings: Settings
) -> list[Report]:
    context = RuleContext(path, module, build_scope_index(module), settings)
    rules = [
        rt(context) for rt in rule_types if settings.target in rt.targets and "python" in rt.file_kinds
    ]
    module.visit(_Dispatcher(rules, context))
    return [report for rule in rules for report in rule.reports]


def _replacement_text(module: cst.Module, report: Report) -> str:
    if report.replacement is None:
        return ""
    if isinstance(report.replacement, cst.RemovalSentinel):
        return ""
    return module.code_for_node(report.replacement)


def _to_findings(
    module: cst.Module, reports: list[Report], path: str, suppressions: Suppressions
) -> list[tuple[Report, Finding]]:
    if not reports:
        return []
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out: list[tuple[Report, Finding]] = []
    for report in reports:
        pos = positions[report.node]
        span = Span(pos.start.line, pos.start.column, pos.end.line, pos.end.column)
        rule = report.rule
        if suppressions.suppressed(rule.code, span):
            continue
        fix = None
        if report.replacement is not None:
            fix = Fix(report.safety, _replacement_text(module, report), report.description)
        finding = Finding(
            code=rule.code,
            name=rule.name,
            message=report.message,
            path=path,
            span=span,
            fix=fix,
            guidance=report.guidance,
            effort=report.effort,
        )
        out.append((report, finding))
    out.sort(key=lambda pair: (pair[1].span, pair[1].code))
    return out


def lint_module(
    module: cst.Module, rule_types: Sequence[type[Rule]], path: str, settings: Settings
) -> list[Finding]:
    """Findings for ``module`` without changing it."""
    reports = _collect(module, rule_types, path, settings)
    return [f for _, f in _to_findings(module, reports, path, Suppressions.from_module(module))]


class _Apply(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.CSTNode | cst.RemovalSentinel]) -> None:
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        replacement = self.replacements.get(id(original_node))
        if replacement is not None:
            return replacement
        return updated_node

    # Removing the only statement of a block would leave invalid code: put `pass` there.
    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not updated_node.body:
            return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated_node


class FixOutcome:
    def __init__(self, module: cst.Module, applied: list[Finding], remaining: list[Finding]) -> None:
        self.module = module
        self.applied = applied
        self.remaining = remaining


def _allowed(safety: Safety, unsafe: bool) -> bool:
    return safety is Safety.SAFE or (unsafe and safety is Safety.UNSAFE)


def fix_module(
    module: cst.Module,
    rule_types: Sequence[type[Rule]],
    path: str,
    settings: Settings,
    unsafe: bool = False,
) -> FixOutcome:
    """Apply non-overlapping fixes, re-lint, repeat until nothing applies."""
    applied: list[Finding] = []
    for _ in range(MAX_ITERATIONS):
        suppressions = Suppressions.from_module(module)
        pairs = _to_findings(module, _collect(module, rule_types, path, settings), path, suppressions)
        chosen: list[tuple[Report, Finding]] = []
        for report, finding in pairs:
            if finding.fix is None or not _allowed(finding.fix.safety, unsafe):
                continue
            # Outer-first (pairs are sorted by span); an overlapping fix waits for the next round.
            if any(finding.span.overlaps(c.span) for _, c in chosen):
                continue
            chosen.append((report, finding))
        if not chosen:
            return FixOutcome(module, applied, [f for _, f in pairs])
        replacements = {id(r.node): r.replacement for r, _ in chosen}
        new_module = module.visit(_Apply(replacements))  # type: ignore[arg-type]
        new_module = _fix_imports(new_module, [r for r, _ in chosen])
        if new_module.code == module.code:
            # A fix that changes nothing would loop forever; treat it as not applicable.
            return FixOutcome(module, applied, [f for _, f in pairs])
        applied.extend(_mark_applied(f) for _, f in chosen)
        module = new_module
    raise ConvergenceError(
        f"fixes did not converge after {MAX_ITERATIONS} rounds "
        f"(last rules: {', '.join(sorted({f.code for f in applied[-5:]}))})"
    )


def _mark_applied(finding: Finding) -> Finding:
    from dataclasses import replace

    return replace(finding, applied=True)


def _fix_imports(module: cst.Module, reports: list[Report]) -> cst.Module:
    adds = {imp for r in reports for imp in r.imports}
    removes = {imp for r in reports for imp in r.unused_imports}
    if not adds and not removes:
        return module
    context = CodemodContext()
    for mod, obj in sorted(adds, key=str):
        AddImportsVisitor.add_needed_import(context, mod, obj)
    if adds:
        module = AddImportsVisitor(context).transform_module(module)
    if removes:
        context = CodemodContext()
        for mod, obj in sorted(removes, key=str):
            RemoveImportsVisitor.remove_unused_import(context, mod, obj)
        module = RemoveImportsVisitor(context).transform_module(module)
    return module
