"""A device test whose "cuda" is a slot's name its callers hand it, and the port leaves there.

ColossalAI's ``MemStats.non_model_data_list(self, device_type)`` answers ``if device_type ==
"cuda": return self._non_model_data_cuda_list ... else: raise TypeError``, and its callers pass
``"cuda"`` positionally through objects of no known type (CN109 leaves each to a person). Moved
alone, the test raises on the program's default path. The project sweep records such readers
with a caller (``ProjectFacts.label_readers``, ``workspace/_value_labels.py``); CN103 asks here
and keeps the test, naming the caller.
"""

from __future__ import annotations

from pathlib import PurePath

import libcst as cst

from cuda2neuron.core import Rule

from .values import argument_of

__all__ = ["held_label", "label_handed"]


def held_label(rule: Rule, node: cst.CSTNode) -> str | None:
    """Where a caller hands the function or method around ``node`` (a "cuda" in its test of the
    recorded parameter) a "cuda" the port leaves, with where the test stands; None for most
    tests."""
    facts = rule.context.settings.project
    if not facts.label_readers:
        return None
    ancestors = rule.context.ancestors
    at = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.FunctionDef)), None)
    if at is None:
        return None
    func = ancestors[at]
    owner = ancestors[at - 2] if at >= 2 and isinstance(ancestors[at - 2], cst.ClassDef) else None
    name = f"{owner.name.value}.{func.name.value}" if owner is not None else func.name.value
    compared = next((a for a in reversed(ancestors) if isinstance(a, cst.Comparison)), None)
    if compared is None:
        return None
    names = {compared.left.value} if isinstance(compared.left, cst.Name) else set()
    names |= {t.comparator.value for t in compared.comparisons if isinstance(t.comparator, cst.Name)}
    # The rule knows its file, not its module's dotted name: a row names this file when its
    # module's path is the file's tail.
    stem = PurePath(rule.context.path).with_suffix("").as_posix()
    for reader, parameter, _, where, caller in sorted(facts.label_readers, key=str):
        if not reader.endswith("." + name) or parameter not in names:
            continue
        path = reader[: -len(name) - 1].replace(".", "/")
        if stem == path or stem.endswith("/" + path):
            return f"its callers hand `{func.name.value}` the word as a name of their own (`{parameter}` at {caller}; the test at {where})"
    return None


def label_handed(rule: Rule, node: cst.CSTNode) -> tuple[str, bool] | None:
    """(where the held test stands, False) when ``node`` is handed by keyword to a recorded
    reader's parameter (``stats.data_list(device_type="cuda")``, matched by the callee's last
    name as the sweep matched its callers): CN102 would move this one, and the held test would
    then reject it. None for most values."""
    facts = rule.context.settings.project
    if not facts.label_readers:
        return None
    found = argument_of(rule.context.ancestors, node)
    if found is None:
        return None
    arg, call = found[1], found[2]
    if arg.star:
        return None
    keyword = arg.keyword.value if arg.keyword is not None else None
    position = None if keyword is not None else [a for a in call.args if a.keyword is None and not a.star].index(arg)
    func = call.func
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    for reader, parameter, at, where, _ in sorted(facts.label_readers, key=str):
        if reader.rsplit(".", 1)[-1] == last and (parameter == keyword or (position is not None and position == at)):
            return f"`{last}`'s `{parameter}`, which reaches the device test at {where} (its callers hand \"cuda\" as a name)", False
    return None
