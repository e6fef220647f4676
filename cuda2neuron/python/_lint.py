"""Run rules over one module and apply their fixes to a fixed point.

Cost per file: one parse (by the caller), then per round one walk (all rules batched) and one
code generation that also yields the reported nodes' spans. Fixes rebuild only the paths to the
replaced nodes. Real files converge in two rounds: one that applies, one that finds nothing new.
"""

from __future__ import annotations

import io
import re
import textwrap
import tokenize
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst

from cuda2neuron.core import MAX_ITERATIONS, ConvergenceError, Finding, Fix, Report, Rule, Safety, Settings, Span, Suppressions

from ._context import MARK, RuleContext
from ._groups import link_groups
from ._lineage import Lineage
from ._positions import spans_and_code, spans_in_statements, spans_of
from ._rebuild import direct_children, rebuild
from ._splice import Splicer
from ._walk import walk_rules

__all__ = ["NET_UNITS", "FixOutcome", "fix_module", "lint_module", "net_unit"]

def _collect(
    module: cst.Module, rule_types: Sequence[type[Rule]], path: str, settings: Settings, source: str | None = None
) -> list[Report]:
    ours = [rt for rt in rule_types if settings.target in rt.targets and "python" in rt.file_kinds]
    if not ours:
        # No rule, no report: the walk would only bind names. A later fix round whose output
        # wakes no rule (its words were all fixed away) is such a round: diffusers 57 of 259.
        return []
    context = RuleContext(path, module, settings, source)
    rules = [rt(context) for rt in ours]
    walk_rules(module, rules, context)
    reports = [report for rule in rules for report in rule.reports]
    for rule in rules:
        # A report names its rule, the rule holds its reports and its context (the module):
        # left in place, that cycle keeps the whole tree alive until the cyclic garbage
        # collector finds it, which then walks ~100k objects per file (diffusers: ~1 s CPU).
        # Without the list, reference counting frees the tree once the reports are dropped.
        rule.reports = []
    if any(r.fences for r in reports):
        reports = _outside_fences(reports)
    if any(rule.net for rule in rules):
        reports = _without_covered_net_reports(reports)
    return reports


def _outside_fences(reports: list[Report]) -> list[Report]:
    """``reports`` without those on or inside a fenced node (``Report.fences``: another
    accelerator's code), except the fencing reports themselves. Trap: dropping them here, before
    the groups are linked, matters — a dropped finding can neither be fixed nor hold a group.
    A quiet fence (``Report.quiet``) keeps out only the rules that port code (advisory ones, such
    as numerics, still speak there), and its own report is dropped unless it kept one out."""
    loud = {id(node) for r in reports if not r.quiet for node in r.fences}
    quiet = {id(node) for r in reports if r.quiet for node in r.fences}
    kept: list[Report] = []
    spoke = False  # a quiet fence kept a porting rule out: its report stays
    for r in reports:
        if r.fences:
            kept.append(r)
        elif _inside(r, loud):
            continue
        elif quiet and not r.rule.advisory and _inside(r, quiet):
            spoke = True
        else:
            kept.append(r)
    return kept if spoke else [r for r in kept if not r.quiet]


def _inside(report: Report, fenced: set[int]) -> bool:
    return bool(fenced) and (id(report.node) in fenced or any(id(a) in fenced for a in report.ancestors))


# The unit a safety net (Rule.net) reports in, and is silenced in: a statement, one item of a
# `with`, a decorator (`with (patch(a, "cuda"), patch(b)):` holds two unrelated calls).
NET_UNITS = (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.WithItem, cst.Decorator)


def net_unit(nodes: Sequence[cst.CSTNode]) -> cst.CSTNode | None:
    """The innermost net unit on a chain (root first): an ``if``'s test belongs to the ``if``,
    a line of its body to that line."""
    return next((node for node in reversed(nodes) if isinstance(node, NET_UNITS)), None)


def _without_covered_net_reports(reports: list[Report]) -> list[Report]:
    """A safety net's reports (see ``Rule.net``), kept once per unit and per net (the first, in
    walk order: a table's rows share one statement) and dropped where another rule already
    reports the node, an ancestor of it, or another part of its unit."""
    others = [r for r in reports if not r.rule.net]
    nodes = {id(r.node) for r in others}
    units = {id(u) for r in others if (u := net_unit((*r.ancestors, r.node))) is not None}
    kept: list[Report] = []
    said: set[tuple[str, int]] = set()  # (net, unit) already reported
    for r in reports:
        if not r.rule.net:
            kept.append(r)
            continue
        unit = id(net_unit((*r.ancestors, r.node)))
        if unit in units or (r.rule.code, unit) in said:
            continue
        if id(r.node) in nodes or any(id(a) in nodes for a in r.ancestors):
            continue
        said.add((r.rule.code, unit))
        kept.append(r)
    return kept


def _finding(
    report: Report, span: Span, path: str, module: cst.Module, applied: bool = False, line_of=None, places=None
) -> Finding:
    fix = None
    if report.replacement is not None:
        text = "" if isinstance(report.replacement, cst.RemovalSentinel) else module.code_for_node(report.replacement)
        fix = Fix(report.safety, text, report.description)
    guidance = report.guidance
    if report.held_by and not applied and line_of is not None:
        guidance = f"{guidance} {_held_note(report, line_of)}".strip()
    message = report.message
    if MARK in message or MARK in guidance:
        message, guidance = _placed(message, report, places), _placed(guidance, report, places)
    return Finding(
        code=report.rule.code,
        name=report.rule.name,
        message=message,
        path=path,
        span=span,
        fix=fix,
        applied=applied,
        guidance=guidance,
        effort=report.effort,
    )


_TOKEN = re.compile(MARK + r"\d+" + MARK)


def _placed(text: str, report: Report, places) -> str:  # noqa: ANN001
    """``text`` with each place token (``RuleContext.mark``) replaced by the node's ``file:line``
    in the file as read; ``places`` maps the node's id to it (``_places``)."""
    marked = report.rule.context.marked
    return _TOKEN.sub(lambda m: (places or {}).get(id(marked.get(m.group(), report.node)), "?"), text)


def _places(first: cst.Module, lineage: Lineage, reports: list[Report], path: str, splicer: Splicer | None) -> dict[int, str]:
    """``file:line`` of every node the reports' messages name by a place token, located in
    ``first`` (the module as parsed) through the lineage; one position pass for them all, and
    none where no message names a place (nearly every file)."""
    nodes = {
        id(node): node
        for r in reports
        if MARK in r.message or MARK in r.guidance
        for token in _TOKEN.findall(r.message + r.guidance)
        if (node := r.rule.context.marked.get(token)) is not None
    }
    if not nodes:
        return {}
    # A stand-in report per node: located as the findings are (its own chain is unknown here).
    stand_ins = [Report(rule=None, node=n, message="", replacement=None, safety=Safety.DISPLAY_ONLY, guidance="", effort=None) for n in nodes.values()]  # type: ignore[arg-type]
    spans = _original_spans(first, lineage, stand_ins, splicer)
    name = path.replace("\\", "/").rpartition("/")[2]
    return {key: f"{name}:{spans[key].start_line}" for key in nodes}


def _held_note(report: Report, line_of) -> str:
    """Why a fix of a group was not applied on its own, naming the findings that held it."""
    named = sorted({(line_of(b), b.rule.code) for b in report.held_by})
    shown = ", ".join(f"{code} at line {line}" for line, code in named[:3])
    if len(named) > 3:
        shown += f" and {len(named) - 3} more"
    floor = report.safety
    why = (
        "whose fix is unsafe: --unsafe-fixes applies them together"
        if floor is Safety.UNSAFE
        else "which has no fix: port them together by hand"
    )
    return (
        f"Not applied on its own: it goes together with {shown} (a device test and the code it "
        f"selects, or the reads and writes of one variable, move as one), {why}."
    )


def _located(module: cst.Module, nodes: list[tuple[cst.CSTNode, Sequence[cst.CSTNode]]], splicer: Splicer | None) -> dict[int, Span]:
    """Spans of ``nodes`` (each with its ancestors, root first) in ``module``, freshly parsed:
    each located within its own top-level statement where the splicer could cut the text."""
    starts = splicer.block_statements() if splicer is not None else None
    if starts is None:
        return spans_of(module, [node for node, _ in nodes])
    lines, indents = starts
    return spans_in_statements(
        module,
        [(node, _innermost(above, lines) if len(above) > 1 and above[0] is module else None) for node, above in nodes],
        lines,
        indents,
    )


def _innermost(ancestors: Sequence[cst.CSTNode], lines: Mapping[int, int], origin=None) -> cst.CSTNode:  # noqa: ANN001
    """The deepest of ``ancestors`` (root first; ``origin`` maps each to the parsed module's
    node) that is a statement whose start line is known; the top-level statement else."""
    for node in reversed(ancestors[1:]):
        node = node if origin is None else origin(node)
        if id(node) in lines:
            return node
    top = ancestors[1]
    return top if origin is None else origin(top)


def _unsuppressed(
    module: cst.Module, reports: list[Report], source: str | None = None, splicer: Splicer | None = None
) -> list[Report]:
    """``reports`` without the ones a suppression comment hides (``source``: the text ``module``
    was parsed from, unchanged; then only the spans are made)."""
    if not reports:
        return reports
    if source is not None:
        spans, code = _located(module, [(r.node, r.ancestors) for r in reports], splicer), source
    else:
        spans, code = spans_and_code(module, [r.node for r in reports])
    suppressions = Suppressions.from_text(code)
    return [r for r in reports if not suppressions.suppressed(r.rule.code, spans[id(r.node)])]


def lint_module(
    module: cst.Module, rule_types: Sequence[type[Rule]], path: str, settings: Settings, source: str | None = None
) -> list[Finding]:
    """Findings for ``module`` without changing it (``source``: its text, when the caller has it).
    A fix linked to others shows the safety it would be applied with (``link_groups``)."""
    reports = _collect(module, rule_types, path, settings, source)
    if not reports:
        return []
    link_groups(reports)
    if source is not None:
        spans, code = _located(module, [(r.node, r.ancestors) for r in reports], Splicer(module, source)), source
    else:
        spans, code = spans_and_code(module, [r.node for r in reports])
    suppressions = Suppressions.from_text(code)

    def line_of(r: Report) -> int:
        return spans[id(r.node)].start_line

    places = _places(module, Lineage(), reports, path, Splicer(module, source) if source is not None else None)
    found = [
        _finding(r, spans[id(r.node)], path, module, line_of=line_of, places=places)
        for r in reports
        if not suppressions.suppressed(r.rule.code, spans[id(r.node)])
    ]
    found.sort(key=lambda f: (f.span, f.code))
    return found


@dataclass
class FixOutcome:
    module: cst.Module
    applied: list[Finding]
    remaining: list[Finding]
    # The final module's code when a round already generated it (saves one code generation).
    code: str | None = None
    # Per applied finding (same order): the round (from 1), the module its fix was applied to
    # and the node it replaced; per remaining finding, the final module and its node. For
    # ``replaced_texts`` / ``remaining_texts``: tests check each span against that text.
    edited: list[tuple[int, cst.Module, cst.CSTNode]] = field(default_factory=list, repr=False)
    kept: list[tuple[cst.Module, cst.CSTNode]] = field(default_factory=list, repr=False)

    @property
    def bytes(self) -> bytes:
        if self.code is None:
            return self.module.bytes
        return self.code.encode(self.module.encoding)

    def replaced_texts(self) -> list[tuple[int, str]]:
        """Per applied finding: its round and the code its fix replaced, as it stood then."""
        return [(n, module.code_for_node(node)) for n, module, node in self.edited]

    def remaining_texts(self) -> list[str]:
        """Per remaining finding: the code it is about, in the final module."""
        return [module.code_for_node(node) for module, node in self.kept]


def _allowed(safety: Safety, unsafe: bool) -> bool:
    return safety is Safety.SAFE or (unsafe and safety is Safety.UNSAFE)


def _choose(reports: list[Report], unsafe: bool) -> list[Report]:
    """The fixes to apply this round: allowed and not overlapping, outer first (a fix inside
    another fix's node waits for the next round). Linear in the reports and their depth: the
    chosen nodes and their ancestors are kept in sets, never compared pair by pair (50,000
    fixes in one file took minutes)."""
    chosen: list[Report] = []
    nodes: set[int] = set()  # the chosen nodes
    above: set[int] = set()  # their ancestors
    for report in sorted(reports, key=lambda r: len(r.ancestors)):
        if report.replacement is None or not _allowed(report.safety, unsafe):
            continue
        key = id(report.node)
        if key in nodes or key in above or any(id(a) in nodes for a in report.ancestors):
            continue
        chosen.append(report)
        nodes.add(key)
        above.update(id(a) for a in report.ancestors)
    return chosen


@dataclass
class _Applied:
    report: Report
    module: cst.Module  # the module the fix was applied to
    round: int


def fix_module(
    module: cst.Module,
    rule_types: Sequence[type[Rule]],
    path: str,
    settings: Settings,
    unsafe: bool = False,
    may_suppress: bool = True,
    source: str | None = None,
    woken_by: Callable[[str], Sequence[type[Rule]]] | None = None,
) -> FixOutcome:
    """Apply non-overlapping fixes, re-lint, repeat until nothing applies.

    ``woken_by(code)``: the rules a run on ``code`` would run (the caller's prefilter). Once
    fixes changed the module, the last round lints with the rules the *output* wakes, so that
    the findings left are the ones a rerun on the output reports.

    Spans cost a code generation, so rounds that apply fixes compute none unless suppression
    comments may exist (``may_suppress``). Every finding, applied or left, is located in the
    module as parsed (``module``, the file as read): the lineage follows each node of a later
    round back to the node it stands for there (python/_lineage.py), and one position pass over
    the parsed module places them all. The last round's code generation yields the output.
    """
    first = module
    lineage = Lineage()
    applied: list[_Applied] = []
    original = source
    code: str | None = None  # the module's code, once generated for woken_by
    # A rewritten module's code: the parsed text of the statements no fix touched, the others
    # generated (python/_splice.py); without the parsed text, a whole code generation.
    splicer = Splicer(first, source) if source is not None else None
    for n in range(1, MAX_ITERATIONS + 1):
        if applied and woken_by is not None:
            code = _code(module, splicer)
            rule_types = tuple(woken_by(code))
        # The rules that search the whole text (RuleContext.source) get it without a second
        # code generation.
        reports = _collect(module, rule_types, path, settings, source if source is not None else code)
        # The first round walks the module parsed from `source`: its code is known, and a file
        # whose findings need no fix (most of them) never pays a whole code generation.
        unchanged = original if source is not None else None
        source = None  # later rounds walk a rewritten module
        if may_suppress and reports:
            reports = _unsuppressed(module, reports, unchanged, splicer)
        link_groups(reports)
        chosen = _choose(reports, unsafe)
        if not chosen:
            return _outcome(first, module, reports, applied, path, lineage, unchanged, code, splicer)
        for r in chosen:
            if isinstance(r.replacement, cst.CSTNode):
                lineage.replaced(r.node, r.replacement)
        new_module = rebuild(module, {id(r.node): r.replacement for r in chosen}, [r.ancestors for r in chosen], lineage)  # type: ignore[misc]
        new_module = _fix_imports(new_module, chosen, lineage)
        if new_module.deep_equals(module):
            # A fix that changes nothing would loop forever; treat it as not applicable.
            return _outcome(first, module, reports, applied, path, lineage, None, code, splicer)
        applied.extend(_Applied(r, module, n) for r in chosen)
        code = None
        # A fix may write a suppression comment (to protect code from other rules): honour it
        # from the next round on.
        if not may_suppress and any(
            isinstance(r.replacement, cst.CSTNode) and "cuda2neuron:" in module.code_for_node(r.replacement)
            for r in chosen
        ):
            may_suppress = True
        module = new_module
    raise ConvergenceError(
        f"fixes did not converge after {MAX_ITERATIONS} rounds "
        f"(last rules: {', '.join(sorted({a.report.rule.code for a in applied[-5:]}))})"
    )


def _outcome(
    first: cst.Module,
    module: cst.Module,
    remaining: list[Report],
    applied: list[_Applied],
    path: str,
    lineage: Lineage,
    source: str | None = None,
    code: str | None = None,
    splicer: Splicer | None = None,
) -> FixOutcome:
    """``first``: the module as parsed; ``source``: its text, when no fix changed it; ``code``:
    ``module``'s code, when already generated."""
    if not remaining and not applied:
        return FixOutcome(module, [], [], code)
    if applied and code is None:
        code = _code(module, splicer)
    reports = [a.report for a in applied] + remaining
    spans = _original_spans(first, lineage, reports, splicer)
    places = _places(first, lineage, reports, path, splicer)

    def line_of(r: Report) -> int:
        span = spans.get(id(r.node))
        if span is None:  # a report of an earlier round that held this one
            span = _original_spans(first, lineage, [r], splicer)[id(r.node)]
        return span.start_line

    done = [
        (_finding(a.report, spans[id(a.report.node)], path, a.module, applied=True, places=places), (a.round, a.module, a.report.node))
        for a in applied
    ]
    done.sort(key=lambda pair: (pair[0].span, pair[0].code))
    left = [(_finding(r, spans[id(r.node)], path, module, line_of=line_of, places=places), (module, r.node)) for r in remaining]
    left.sort(key=lambda pair: (pair[0].span, pair[0].code))
    return FixOutcome(module, [f for f, _ in done], [f for f, _ in left], code, [e for _, e in done], [e for _, e in left])


def _code(module: cst.Module, splicer: Splicer | None) -> str:
    if splicer is not None:
        return splicer.code(module)
    return spans_and_code(module, ())[1]


_START = Span(1, 0, 1, 0)


def _original_spans(first: cst.Module, lineage: Lineage, reports: list[Report], splicer: Splicer | None = None) -> dict[int, Span]:
    """Each report's span in ``first`` (the module as parsed), keyed by ``id(report.node)``.

    A node the lineage traces back to the parsed module is located there; one that stands for
    nothing there (a node inside an added import) takes the place of its nearest ancestor that
    does, and an added import line itself the start of the file.
    """
    origin = {id(r.node): lineage.origin(r.node) for r in reports}
    # A finding about the whole module is about the whole file; a node built into the module
    # itself (an added import line) stands for no text of it.
    added = {id(r.node) for r in reports if isinstance(origin[id(r.node)], cst.Module) and not isinstance(r.node, cst.Module)}
    # Each origin with the statement of ``first`` its report's statement stands for: located
    # within that statement alone where the splicer could cut the text (else as before).
    starts = splicer.block_statements() if splicer is not None else None
    if starts is None:
        wanted = [o for k, o in origin.items() if k not in added]
        found = spans_of(first, wanted) if wanted else {}
    else:
        lines, indents = starts
        located = [
            (
                origin[id(r.node)],
                _innermost(r.ancestors, lines, lineage.origin)
                if len(r.ancestors) > 1 and isinstance(r.ancestors[0], cst.Module)
                else None,
            )
            for r in reports
            if id(r.node) not in added
        ]
        found = spans_in_statements(first, located, lines, indents) if located else {}
    spans: dict[int, Span] = {}
    lost: list[Report] = []
    for r in reports:
        o = origin[id(r.node)]
        span = _START if id(r.node) in added else found.get(id(o))
        if span is None:
            lost.append(r)
        else:
            spans[id(r.node)] = span
    if lost:
        chains = {id(r.node): [lineage.origin(a) for a in reversed(r.ancestors)] for r in lost}
        more = spans_of(first, [a for chain in chains.values() for a in chain if not isinstance(a, cst.Module)])
        for r in lost:
            spans[id(r.node)] = next((more[id(a)] for a in chains[id(r.node)] if id(a) in more), _START)
    return spans


def _module_binds(module: cst.Module, mod: str, obj: str | None) -> bool:
    """Cheap check that ``import mod`` / ``from mod import obj`` is already at module level."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if obj is None and isinstance(small, cst.Import):
                if any(a.asname is None and module.code_for_node(a.name) == mod for a in small.names):
                    return True
            if obj is not None and isinstance(small, cst.ImportFrom) and small.module is not None:
                if module.code_for_node(small.module) == mod and not isinstance(small.names, cst.ImportStar):
                    if any(a.asname is None and module.code_for_node(a.name) == obj for a in small.names):
                        return True
    return False


def _maybe_unused(code: str, local: str) -> bool:
    # The import helpers' scope analysis is expensive; only pay it when the name no longer
    # appears outside import lines. `torch.neuron.synchronize` is not a use of a from-imported
    # `synchronize`: no dot before. Comments and docstrings are prose, not uses: `code` comes
    # without them (`_prose_out`), so a docstring that names `GradScaler` does not keep a nested
    # CUDA import alive.
    pattern = re.compile(rf"(?<![.\w]){re.escape(local)}\b")
    lines = [
        (row, line)
        for row, line in enumerate(code.splitlines(), 1)
        if not line.lstrip().startswith(("import ", "from ")) and pattern.search(line)
    ]
    if not lines:
        return True
    return _string_mentions_only(code, local, {row for row, _ in lines})


def _string_mentions_only(code: str, local: str, rows: set[int]) -> bool:
    """Is every mention of ``local`` on ``rows`` inside a string that cannot name the binding?

    A string that *is* the name or a dotted path from it (``__all__ = ["amp"]``,
    ``getattr(m, "sync")``, ``"amp.autocast"``) or an f-string field using it keeps the import:
    the safe side. Text around it (``'--enable-amp'``, ``"use amp for speed"``) is not a use:
    Swin's ``--enable-amp`` option kept a dead ``import torch.cuda.amp as amp``. Nor is the key
    of a dict display (``{"cuda_device_count": get_count()}``): data, which no lookup by name
    reaches; composer's environment report kept a dead ``from torch.cuda import ...`` for one.
    """
    name = re.escape(local)
    naming = re.compile(rf"[rRuUbB]*(['\"]{{1,3}}){name}(\.\w+)*\1")
    field = re.compile(rf"\{{[^}}]*(?<![.\w]){name}\b")
    mention = re.compile(rf"(?<![.\w]){name}\b")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    brackets: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            brackets.append(tok.string)
        elif tok.type == tokenize.OP and tok.string in ")]}" and brackets:
            brackets.pop()
        if not rows.intersection(range(tok.start[0], tok.end[0] + 1)):
            continue
        if tok.type == tokenize.NAME and tok.string == local:
            return False
        if tok.type == tokenize.STRING and mention.search(tok.string):
            if brackets[-1:] == ["{"] and _next_is_colon(tokens, i):
                continue  # a dict key
            prefix = tok.string[: len(tok.string) - len(tok.string.lstrip("rRuUbBfF"))]
            if naming.fullmatch(tok.string) or ("f" in prefix.lower() and field.search(tok.string)):
                return False
        elif tok.type not in (tokenize.STRING, tokenize.NAME) and mention.search(tok.string):
            return False  # text the tokenizer splits otherwise (3.12 f-string parts): the safe side
    return True


def _next_is_colon(tokens: list[tokenize.TokenInfo], i: int) -> bool:
    following = next((t for t in tokens[i + 1 :] if t.type not in (tokenize.NL, tokenize.COMMENT)), None)
    return following is not None and following.type == tokenize.OP and following.string == ":"


_PROSE_AFTER = frozenset({tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING})


def _prose_out(code: str) -> str:
    """``code`` without its comments and statement-level strings (docstrings, bare strings).

    Only those: a string that is part of an expression (``__all__ = ["GradScaler"]``,
    ``getattr(amp, "GradScaler")``) stays, and keeps the import (the safe side). Lines keep their
    places; text the tokenizer cannot read comes back unchanged.
    """
    if "#" not in code and '"' not in code and "'" not in code:
        return code
    lines = code.splitlines(keepends=True)
    blank: list[tuple[tuple[int, int], tuple[int, int]]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    previous = tokenize.NEWLINE
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            blank.append((tok.start, tok.end))
        elif tok.type == tokenize.STRING and previous in _PROSE_AFTER:
            after = next((t.type for t in tokens[i + 1 :] if t.type not in (tokenize.COMMENT, tokenize.NL)), tokenize.NEWLINE)
            if after in (tokenize.NEWLINE, tokenize.ENDMARKER):
                blank.append((tok.start, tok.end))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type
    for (srow, scol), (erow, ecol) in reversed(blank):
        if srow == erow:
            line = lines[srow - 1]
            lines[srow - 1] = line[:scol] + " " * (ecol - scol) + line[ecol:]
        else:
            lines[srow - 1] = lines[srow - 1][:scol] + "\n"
            for row in range(srow, erow - 1):
                lines[row] = "\n"
            lines[erow - 1] = " " * ecol + lines[erow - 1][ecol:]
    return "".join(lines)


def _fix_imports(module: cst.Module, reports: list[Report], lineage: Lineage | None = None) -> cst.Module:
    # libcst's codemod package costs ~0.3 s to import (its matchers): only when an import changes.
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

    from ._matcher_scan import install

    install()  # each helper below scanned its ~1,000 methods per instance: ~60% of a small fix
    adds = {imp for r in reports for imp in r.imports if not _module_binds(module, *imp)}
    removes = {imp for r in reports for imp in r.unused_imports}
    if adds:
        context = CodemodContext()
        for mod, obj in sorted(adds, key=str):
            AddImportsVisitor.add_needed_import(context, mod, obj)
        # Only the module's own statements can change: an import is added among them, or a
        # name to one of its `from` imports.
        paths = {id(module)}
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                imports = [id(n) for n in stmt.body if isinstance(n, (cst.Import, cst.ImportFrom))]
                if imports:
                    paths.update(imports, (id(stmt),))
        module = _transform(AddImportsVisitor(context), module, paths, lineage)
    if removes:
        # libcst's own `module.code` enters a context manager per node; the span state does not.
        code = _prose_out(spans_and_code(module, ())[1])
        candidates = {
            (mod, obj, alias)
            for mod, obj in removes
            for alias, scopes in _aliases(module, mod, obj).items()
            if _maybe_unused(code, alias or obj or mod.split(".")[0])
            or _unused_where_nested(module, scopes, alias or obj or mod.split(".")[0])
        }
        if candidates:
            context = CodemodContext()
            for mod, obj, alias in sorted(candidates, key=str):
                RemoveImportsVisitor.remove_unused_import(context, mod, obj, alias)
            # An import may be removed wherever it is: the paths down to every import statement.
            paths = {id(n) for chain in _import_chains(module) for n in chain}
            module = _transform(RemoveImportsVisitor(context), module, paths, lineage)
    return module


def _transform(visitor, module: cst.Module, paths: set[int], lineage: Lineage | None) -> cst.Module:
    """Run one of libcst's import helpers over ``module``, rebuilding only the nodes on
    ``paths`` (ids): everything else keeps its identity, which the lineage needs (every node the
    helper builds is recorded there) and which costs nothing. ``transform_module`` would first
    deep-copy the module for its metadata and then rebuild every node of the copy."""
    from dataclasses import replace

    from libcst.metadata import MetadataWrapper

    def on_visit(node: cst.CSTNode) -> bool:
        return id(node) in paths and type(visitor).on_visit(visitor, node)

    def on_leave(original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[no-untyped-def]
        result = type(visitor).on_leave(visitor, original, updated)
        if lineage is not None and isinstance(result, cst.CSTNode) and result is not original:
            lineage.built(result, original, direct_children(original))
        return result

    visitor.on_visit = on_visit  # type: ignore[method-assign]
    visitor.on_leave = on_leave  # type: ignore[method-assign]
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    with visitor.resolve(wrapper):
        visitor.context = replace(visitor.context, wrapper=wrapper)
        result = module.visit(visitor)
    assert isinstance(result, cst.Module)
    return result


def _import_chains(module: cst.Module) -> list[tuple[cst.CSTNode, ...]]:
    """Each import statement of ``module`` with the nodes above it, root first; expressions
    hold no statements and are not entered."""
    chains: list[tuple[cst.CSTNode, ...]] = []
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(module, ())]
    while stack:
        node, above = stack.pop()
        chain = (*above, node)
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            chains.append(chain)
            continue
        if isinstance(node, cst.BaseExpression):
            continue
        for child in direct_children(node):
            if isinstance(child, (cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.BaseCompoundStatement, cst.ExceptHandler, cst.ExceptStarHandler, cst.Else, cst.Finally, cst.MatchCase, cst.If)):
                stack.append((child, chain))
    return chains


def _unused_where_nested(module: cst.Module, scopes: list[cst.FunctionDef | None], local: str) -> bool:
    """A name still used somewhere in the file may be unused where a function imports it
    (``from torch.cuda.amp import GradScaler`` in ``__init__``, the name used again by another
    function's own import). When every import of it sits in a function, one of those functions no
    longer uses it, and none mentions it in a string (the safe side), the import helper's scope
    analysis may decide, per scope."""
    if not scopes or any(f is None for f in scopes):
        return False
    quoted = re.compile(rf"""['"]{re.escape(local)}\b""")
    texts = [_prose_out(textwrap.dedent(module.code_for_node(f))) for f in scopes]  # type: ignore[arg-type]
    # A function whose only mention is a string (`globals()["GradScaler"]`) would lose its
    # import to the scope analysis: keep every import of the name then.
    if any(quoted.search(t) and _maybe_unused(quoted.sub("''", t), local) for t in texts):
        return False
    return any(_maybe_unused(t, local) for t in texts)


def _aliases(module: cst.Module, mod: str, obj: str | None) -> dict[str | None, list[cst.FunctionDef | None]]:
    """The ``as`` names under which ``mod`` (or ``obj`` from it) is imported anywhere in the
    module (None for an import without ``as``), each with the function each import sits in (None
    at module level, in a class body or a branch of one): the import helper removes an alias only
    by its name. Imports inside functions, branches and ``try`` bodies count too (detectron2
    imports ``GradScaler`` in its train loop): the helper's scope analysis removes each one only
    where its own scope no longer uses it, and a block left empty gets ``pass``."""
    found: dict[str | None, list[cst.FunctionDef | None]] = {}
    for small, func in _imports(module):
        if obj is None and isinstance(small, cst.Import):
            names = [a for a in small.names if module.code_for_node(a.name) == mod]
        elif obj is not None and isinstance(small, cst.ImportFrom) and small.module is not None:
            if module.code_for_node(small.module) != mod or isinstance(small.names, cst.ImportStar):
                continue
            names = [a for a in small.names if module.code_for_node(a.name) == obj]
        else:
            continue
        for a in names:
            alias = a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name) else None
            found.setdefault(alias, []).append(func)
    return found


class _ImportCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[cst.Import | cst.ImportFrom, cst.FunctionDef | None]] = []
        self._functions: list[cst.FunctionDef | None] = [None]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._functions.append(None)  # a class body is its own scope, read by its methods' code

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._functions.pop()

    def visit_Import(self, node: cst.Import) -> bool:
        self.found.append((node, self._functions[-1]))
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.found.append((node, self._functions[-1]))
        return False

    # Expressions hold no import statements: do not walk into them.
    def visit_BaseExpression(self, node: cst.BaseExpression) -> bool:  # type: ignore[override]
        return False


def _imports(module: cst.Module) -> list[tuple[cst.Import | cst.ImportFrom, cst.FunctionDef | None]]:
    collector = _ImportCollector()
    module.visit(collector)
    return collector.found
