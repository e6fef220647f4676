"""A device literal stored on an instance whose class hands the attribute to a reader that stays.

``runner = Runner(); runner.device = "cuda"`` where ``Runner`` (another module's) hands
``self.device`` to a device test a safe run leaves on "cuda" before raising on any other device
(``ProjectFacts.device_readers``): moved alone, the stored "neuron" reaches the raise. So does
``self.device = "cuda"`` in a method of such a class, or of a subclass, after construction.
``device_readers.device_reader`` asks here after the arguments and the defaults.
"""

from __future__ import annotations

from pathlib import PurePath

import libcst as cst

from cuda2neuron.core import Rule

from .names import call_qualname

__all__ = ["stored_reader"]


def stored_reader(rule: Rule, node: cst.CSTNode) -> tuple[str, bool] | None:
    """(where the reader's test stands and through what, whether --unsafe-fixes moves it) when
    ``node`` is the value stored on ``obj.<attribute>``; None otherwise."""
    ancestors = rule.context.ancestors
    assign = ancestors[-1] if ancestors else None
    if not isinstance(assign, cst.Assign) or assign.value is not node:
        return None
    facts = rule.context.settings.project
    for target in (t.target for t in assign.targets):
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)):
            continue
        owner, attribute = target.value.value, target.attr.value
        dotted = _own_class(rule, ancestors) if owner == "self" else _instance_class(rule, ancestors, owner)
        if dotted is None:
            continue
        for parameter, _, where, unsafe in _rows(rule, dotted):
            if parameter == attribute:
                return f"`{dotted.removeprefix('./').rsplit('.', 1)[-1]}`'s `{attribute}`, stored here after construction and read by the device test at {where}", unsafe
    return None


def _rows(rule: Rule, dotted: str) -> tuple[tuple[str, int | None, str, bool], ...]:
    """The reader rows of ``dotted``; a class of the rule's own file is named by its path."""
    facts = rule.context.settings.project
    if not dotted.startswith("./"):
        return facts.device_reader(dotted)
    stem = PurePath(rule.context.path).with_suffix("").as_posix()
    name = dotted[2:]
    return tuple(
        (parameter, at, where, unsafe)
        for found, parameter, at, where, unsafe in sorted(facts.device_readers)
        if found.rpartition(".")[2] == name
        and (stem == found.rpartition(".")[0].replace(".", "/") or stem.endswith("/" + found.rpartition(".")[0].replace(".", "/")))
    )


def _own_class(rule: Rule, ancestors: list[cst.CSTNode]) -> str | None:
    """``./Name`` for the class whose method holds the store (the sweep names it by module)."""
    for k in range(len(ancestors) - 1, 1, -1):
        if isinstance(ancestors[k], cst.FunctionDef):
            owner = ancestors[k - 2]
            return f"./{owner.name.value}" if isinstance(ancestors[k - 1], cst.IndentedBlock) and isinstance(owner, cst.ClassDef) else None
    return None


def _instance_class(rule: Rule, ancestors: list[cst.CSTNode], name: str) -> str | None:
    """The qualified class ``name`` is bound to by ``name = Cls(...)`` in the enclosing function
    (or the module)."""
    scope = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), ancestors[0] if ancestors else None)
    body = scope.body.body if isinstance(scope, cst.FunctionDef) and isinstance(scope.body, cst.IndentedBlock) else getattr(scope, "body", ())
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (
                isinstance(small, cst.Assign)
                and isinstance(small.value, cst.Call)
                and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
            ):
                return call_qualname(rule, small.value)
    return None
