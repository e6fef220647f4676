"""Names: resolving a callee once, telling a use of a name from a binding, import clean-up."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

__all__ = ["call_qualname", "import_to_drop", "is_device_word", "is_reference", "terminal_name"]


def terminal_name(node: cst.BaseExpression) -> str | None:
    """``c`` for ``a.b.c`` or ``c``; the cheap gate rules test before resolving names."""
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def call_qualname(rule: Rule, call: cst.Call) -> str | None:
    """``rule.qualname(call.func)``, computed once per call node for all rules that ask.

    A dozen CN5/6/8 rules look at every call; resolving the callee once and sharing the answer
    keeps their cost per call at one resolution. The memo lives on the per-pass context
    (a new context each lint round), keyed by node identity: the tree is alive for the whole
    pass, and a node is only ever visited in one scope, so the answer cannot go stale.
    """
    memo: dict[int, str | None] = rule.context.__dict__.setdefault("_eco_call_qualnames", {})
    key = id(call)
    if key in memo:
        return memo[key]
    # Same answer as ``rule.qualname(call.func)``, but the head name is looked up before any
    # string is built: most callees (``self.fc``, ``x.view``) start with a local and stop there.
    parts: list[str] = []
    node = call.func
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    qualified = None
    if isinstance(node, cst.Name):
        resolved = rule.context.scope.lookup(node.value)
        if resolved is not None:
            qualified = ".".join([resolved, *reversed(parts)])
    memo[key] = qualified
    return qualified


# Parents under which a Name is not a use of what the name is bound to.
_NOT_A_USE = (
    cst.ImportAlias,
    cst.AsName,
    cst.ImportFrom,
    cst.Import,
    cst.FunctionDef,
    cst.ClassDef,
    cst.Param,
    cst.AssignTarget,
    cst.Global,
    cst.Nonlocal,
)


def is_reference(rule: Rule, node: cst.Name) -> bool:
    """True when ``node`` reads the binding of its name (and so may resolve to an import).

    ``x.synchronize`` must not resolve the bare ``synchronize`` through
    ``from torch.cuda import synchronize``: only uses of the name count.
    """
    parent = rule.context.parent
    if parent is None:
        return True
    if isinstance(parent, _NOT_A_USE):
        return False
    # `obj.synchronize`: the member name is not the imported `synchronize`.
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False
    # `f(synchronize=...)`: a keyword, not a use.
    if isinstance(parent, cst.Arg) and parent.keyword is node:
        return False
    if isinstance(parent, cst.NameItem):  # global/nonlocal lists
        return False
    return True


def import_to_drop(rule: Rule, expr: cst.BaseExpression) -> tuple[tuple[str, str | None], ...]:
    """The from-import that ``expr`` depends on and a rewrite may leave unused.

    ``amp.autocast`` after ``from torch.cuda import amp`` -> (("torch.cuda", "amp"), ("torch.cuda.amp", None));
    ``autocast`` after ``from torch.cuda.amp import autocast`` -> (("torch.cuda.amp", "autocast"), ...).
    ``import torch`` is never dropped (the rewrite usually needs it). The engine removes the
    import only if nothing else uses it.
    """
    head = expr
    while isinstance(head, cst.Attribute):
        head = head.value
    if not isinstance(head, cst.Name):
        return ()
    qualified = rule.qualname(head)
    if qualified is None or "." not in qualified:
        return ()
    module, _, obj = qualified.rpartition(".")
    # `from module import obj [as x]` or `import module.obj as x` (whose alias may equal the last
    # part: Swin's `import torch.cuda.amp as amp`); the engine finds the name each binds and
    # removes whichever exists, if unused.
    return ((module, obj), (qualified, None))


def is_device_word(word: str) -> bool:
    """Does an identifier (or config key) name a device? ``device``, ``DEVICE``, ``device_type``,
    ``dev``, ``train_device``, ``self.device``... but not ``cuda``, ``impl`` or ``backend``."""
    parts = word.lower().strip("_").split("_")
    return "device" in parts or "devices" in parts or parts[-1] == "dev" or parts[0] == "dev"
