"""A device test in a return whose answer another module's guard builds on.

mmengine's ``def is_cuda_available(): return torch.cuda.is_available()`` is called by
``AmpOptimWrapper.__init__``'s ``assert is_cuda_available() or ...``, which then builds a
``torch.cuda.amp.GradScaler`` the port leaves: the return moved alone opens that code on
Trainium. The project sweep records such functions with the guard and the sink
(``ProjectFacts.device_returns``, ``workspace/_value_returns.py``); the kernel gates ask here
about a test in a return and leave it, naming both.
"""

from __future__ import annotations

from pathlib import PurePath

import libcst as cst

from cuda2neuron.core import Rule

__all__ = ["returned_guard"]


def returned_guard(rule: Rule, ancestors: list[cst.CSTNode], i: int) -> str | None:
    """The guard and the CUDA code the answer of the top-level function whose return is
    ``ancestors[i]`` fronts in the project; None when the sweep recorded none."""
    facts = rule.context.settings.project
    if not facts.device_returns:
        return None
    # A top-level function's own return: Module, FunctionDef, ... (a method's answer is not
    # recorded, and a nested function's return is not its enclosing function's answer).
    func = ancestors[1] if i > 1 and isinstance(ancestors[1], cst.FunctionDef) else None
    if func is None or any(isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) for a in ancestors[2:i]):
        return None
    # The rule knows its file, not its module's dotted name: a row names this file when its
    # module's path is the file's tail.
    stem = PurePath(rule.context.path).with_suffix("").as_posix()
    for dotted, where, guard in sorted(facts.device_returns):
        module, _, name = dotted.rpartition(".")
        path = module.replace(".", "/")
        if name == func.name.value and (stem == path or stem.endswith("/" + path)):
            return f"the answer of `{name}()` (returned at {where}) is tested in front of {guard}"
    return None
