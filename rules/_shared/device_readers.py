"""A device literal whose reader in another module stays as it is.

lerobot's ``make_compile_config(config_cls)`` builds ``config_cls(device="cuda")``; every policy
config it is handed runs ``PreTrainedConfig.__post_init__``, which asks
``is_torch_device_available(self.device)``: ``if try_device.startswith("cuda"): return
torch.cuda.is_available() ... else: raise ValueError("Unknown device")``. That test guards torch
code, so a safe run leaves it (CN103 unsafe), and the literal moved to "neuron" reaches the raise.
The project sweep records such readers and the functions and classes that hand them a parameter
or a field (``ProjectFacts.device_readers``, ``workspace/_value_readers.py``); CN102 asks here
before it moves a literal: handed to one (by keyword or position, or as a keyword to a class
the function was handed, whose fields are known by name only), or the default of one's parameter.
"""

from __future__ import annotations

from pathlib import PurePath

import libcst as cst

from cuda2neuron.core import Rule

from .device_stores import stored_reader
from .names import call_qualname
from .values import argument_of

__all__ = ["device_reader"]


def device_reader(rule: Rule, node: cst.CSTNode) -> tuple[str, bool] | None:
    """Where the device test that reads ``node``'s value stands (``file:line``) and through what,
    when that test stays in a safe run and raises on any other device, and whether
    ``--unsafe-fixes`` moves that test (its branches call torch only); None otherwise."""
    facts = rule.context.settings.project
    if not facts.device_readers:
        return None
    ancestors = rule.context.ancestors
    found = argument_of(ancestors, node)
    if found is not None:
        return _handed(rule, found[1], found[2])
    return _default_of(rule, node) or stored_reader(rule, node)


def _handed(rule: Rule, arg: cst.Arg, call: cst.Call) -> tuple[str, bool] | None:
    facts = rule.context.settings.project
    keyword = arg.keyword.value if arg.keyword is not None else None
    position = None
    if keyword is None:
        if arg.star:
            return None
        position = [a for a in call.args if a.keyword is None and not a.star].index(arg)
    qualified = call_qualname(rule, call)
    if qualified is not None:
        for parameter, at, where, unsafe in facts.device_reader(qualified):
            if parameter == keyword or (position is not None and at == position):
                return f"`{qualified}`'s `{parameter}`, read by the device test at {where}", unsafe
        return None
    # `config_cls(device="cuda")` where `config_cls` is a parameter: a class handed in at run
    # time; the project's classes that read the field are the candidates, by the keyword.
    func = call.func
    if keyword is None or not isinstance(func, cst.Name) or not _is_parameter(rule, func.value):
        return None
    classes = sorted(
        (dotted, where, unsafe) for dotted, parameter, _, where, unsafe in facts.device_readers
        if parameter == keyword and dotted.rsplit(".", 1)[-1][:1].isupper()
    )
    if not classes:
        return None
    dotted, where, _ = classes[0]
    # Any of them may be the one: --unsafe-fixes moves the literal only where every test moves.
    unsafe = all(c[2] for c in classes)
    more = f" and {len(classes) - 1} more" if len(classes) > 1 else ""
    return f"`{func.value}(...)`, a class handed in at run time: the project's `{dotted}`{more} reads `{keyword}` with the device test at {where}", unsafe


def _is_parameter(rule: Rule, name: str) -> bool:
    """Is ``name`` a parameter of the function the visited node is in?"""
    for anc in reversed(rule.context.ancestors):
        if isinstance(anc, cst.FunctionDef):
            params = anc.params
            every = (*params.posonly_params, *params.params, *params.kwonly_params)
            return any(p.name.value == name for p in every)
    return False


def _default_of(rule: Rule, node: cst.CSTNode) -> tuple[str, bool] | None:
    """``def f(device="cuda")`` where ``f``'s ``device`` reaches a reader."""
    ancestors = rule.context.ancestors
    param = next((a for a in reversed(ancestors) if isinstance(a, cst.Param)), None)
    if param is None or param.default is not node:
        return None
    func = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if func is None:
        return None
    # The rule knows its file, not its module's dotted name: a row names this file when its
    # module's path is the file's tail.
    stem = PurePath(rule.context.path).with_suffix("").as_posix()
    name, wanted = func.name.value, param.name.value
    for dotted, parameter, _, where, unsafe in sorted(rule.context.settings.project.device_readers):
        module, _, last = dotted.rpartition(".")
        if last == name and parameter == wanted and (stem == module.replace(".", "/") or stem.endswith("/" + module.replace(".", "/"))):
            return f"`{name}`'s `{parameter}`, read by the device test at {where}", unsafe
    return None
