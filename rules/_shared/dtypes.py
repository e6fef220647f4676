"""Does a dtype reach the device? Only there do float64 and float8 matter (CN801, CN619).

A dtype *value* is not a tensor. ``{torch.float64: "F64"}``, ``if x.dtype in (torch.float32,
torch.float64):``, ``parametrize("dtype", [torch.float32, torch.float64])`` or a beta schedule
built on the CPU with ``torch.linspace(..., dtype=torch.float64)`` and handed to NumPy put
nothing on the device; reporting them made 10 of 13 float64 findings of a real port false, and
the unsafe fix turned ``{torch.float64: "F64", torch.float32: "F32"}`` into a dict whose float32
entry it silently overwrote. A dtype reaches the device where it makes or casts a tensor that
may live there:

* ``x.to(dtype)``, ``x.to(device, dtype)``, ``x.to(dtype=...)``, ``x.type(dtype)``, and
  ``x.op(..., dtype=...)`` on any tensor method (``logits.softmax(-1, dtype=...)``), unless the
  tensor is provably on the CPU (``x.cpu().to(...)``, ``torch.from_numpy(a).to(...)``, a
  factory called without a device) or the same call names a CPU device;
* a factory (``torch.zeros``, ``torch.tensor``, ``torch.linspace`` ...) given a device that is
  not the CPU, or whose result is moved at once (``torch.tensor(a, dtype=...).to(device)``);
* a torch operation on tensors (``torch.sum(x, dtype=...)``, ``F.softmax(x, dtype=...)``): the
  result lives where its input does;
* a module built with it (``nn.Linear(4, 4, dtype=...)``): its parameters go where the model
  goes; a callee outside torch given it by a keyword that says dtype (``torch_dtype=``,
  ``freqs_dtype=``: a model loader, the project's own builder) or beside a device
  (``maybe_adjust_dtype_for_device(torch.float64, x.device)``);
* ``torch.set_default_dtype(...)``: every tensor made afterwards.

The value may come through ``a if c else b``, ``a or b`` and a plain name bound to it in the same
scope (``dtype = torch.float64`` ... ``x.to(dtype)``); ``DtypeBindings`` follows those names.
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

from .names import call_qualname
from .strings import string_value

__all__ = ["DtypeBindings", "Use", "dtype_test_of", "dtype_use", "on_host"]

_FACTORIES = frozenset(
    f"torch.{n}"
    for n in (
        "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range",
        "linspace", "logspace", "eye", "tensor", "as_tensor", "asarray", "empty_strided", "from_numpy",
        "frombuffer", "scalar_tensor", "tril_indices", "triu_indices", "hann_window", "hamming_window",
    )
)  # fmt: skip
_CPU_DEVICES = frozenset({"cpu"})
# Calls that end a chain on the host: what they return lives in host memory.
_TO_HOST = frozenset({"cpu", "numpy"})
# Keywords that hand a model its dtype (transformers' loaders take torch_dtype=).
_DTYPE_KEYWORDS = frozenset({"dtype", "torch_dtype"})


class Use:
    """Where a dtype value goes: onto the device, into a name (followed), or nowhere of interest."""

    DEVICE = "device"
    BINDING = "binding"


def _transparent(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
    """The value of ``child`` is the value of ``parent`` (a branch of ``a if c else b``, a side of
    ``a or b``, parentheses)."""
    if isinstance(parent, cst.IfExp):
        return child is parent.body or child is parent.orelse
    if isinstance(parent, cst.BooleanOperation):
        return True
    return False


def dtype_use(rule: Rule, node: cst.BaseExpression, ancestors: list[cst.CSTNode] | tuple[cst.CSTNode, ...] | None = None) -> tuple[str, str] | None:
    """(Use.DEVICE, "") when the dtype value ``node`` reaches the device, (Use.BINDING, name) when
    it is bound to a plain name (``dtype = torch.float64``), None otherwise."""
    chain = list(rule.context.ancestors if ancestors is None else ancestors)
    child: cst.CSTNode = node
    while chain and _transparent(chain[-1], child):
        child = chain.pop()
    if not chain:
        return None
    parent = chain[-1]
    if isinstance(parent, cst.Assign):
        if child is parent.value and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            return Use.BINDING, parent.targets[0].target.value
        return None
    if isinstance(parent, cst.AnnAssign):
        if child is parent.value and isinstance(parent.target, cst.Name):
            return Use.BINDING, parent.target.value
        return None
    if not isinstance(parent, cst.Arg) or len(chain) < 2 or not isinstance(chain[-2], cst.Call):
        return None
    call = chain[-2]
    arg = parent
    return (Use.DEVICE, "") if _reaches_device(rule, call, arg, chain[:-2]) else None


def _reaches_device(rule: Rule, call: cst.Call, arg: cst.Arg, above: list[cst.CSTNode]) -> bool:
    keyword = arg.keyword.value if arg.keyword is not None else None
    func = call.func
    qualified = call_qualname(rule, call)
    if qualified == "torch.set_default_dtype":
        return True
    if isinstance(func, cst.Attribute) and qualified is None:
        # A method: `x.to(dtype)`, `x.type(dtype)`, `x.sum(dtype=...)`, `model.to(dtype)`.
        method = func.attr.value
        if method in ("to", "type"):
            if keyword not in (None, "dtype"):
                return False
        elif keyword not in _DTYPE_KEYWORDS:
            return False
        if _names_cpu(call) or on_host(rule, func.value):
            return False
        return True
    if qualified is None or not (qualified == "torch" or qualified.startswith("torch.")):
        # A callee outside torch (a model loader, the project's own builder or helper): a dtype
        # it is handed by a keyword that says dtype (`torch_dtype=`, `freqs_dtype=`), or beside a
        # device (`maybe_adjust_dtype_for_device(torch.float64, x.device)`), is for device tensors.
        if keyword is not None:
            return "dtype" in keyword and not _names_cpu(call)
        return any(_is_device_value(a.value) for a in call.args if a is not arg) and not _names_cpu(call)
    if keyword not in _DTYPE_KEYWORDS:
        return False
    if qualified in _FACTORIES:
        device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
        if device is not None:
            return not _is_cpu(device)
        return _moved_at_once(call, above)
    if qualified is not None and qualified.startswith("torch.") and qualified.endswith("_like"):
        return not any(on_host(rule, a.value) for a in call.args if a.keyword is None)
    # An operation on tensors (`torch.sum(x, dtype=...)`, `F.softmax`, `nn.Linear(...)`): the
    # result, or the module's parameters, go where the inputs go.
    inputs = [a.value for a in call.args if a.keyword is None]
    return not inputs or not all(on_host(rule, v) for v in inputs)


def _is_device_value(node: cst.BaseExpression) -> bool:
    """``x.device``, ``device``, ``self.device``: an argument that names a device."""
    if isinstance(node, cst.Attribute):
        return node.attr.value == "device" or node.attr.value.endswith("_device")
    return isinstance(node, cst.Name) and (node.value == "device" or node.value.endswith("_device"))


def _is_cpu(node: cst.BaseExpression) -> bool:
    value = string_value(node)
    if value is not None:
        return value.split(":")[0] in _CPU_DEVICES
    if isinstance(node, cst.Call) and node.args:
        # torch.device("cpu")
        first = node.args[0].value
        inner = string_value(first)
        return inner is not None and inner.split(":")[0] in _CPU_DEVICES and isinstance(node.func, (cst.Attribute, cst.Name))
    return False


def _names_cpu(call: cst.Call) -> bool:
    """The call's device argument (``device=`` or a positional device string) is the CPU."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "device":
            return _is_cpu(a.value)
        if a.keyword is None and string_value(a.value) is not None:
            return _is_cpu(a.value)
    return False


def _moved_at_once(call: cst.Call, above: list[cst.CSTNode]) -> bool:
    """``torch.tensor(a, dtype=...).to(device)`` / ``.cuda()``: the new tensor goes to a device
    (not the CPU) in the same expression."""
    if len(above) < 2:
        return False
    attr, outer = above[-1], above[-2]
    if not (isinstance(attr, cst.Attribute) and attr.value is call and isinstance(outer, cst.Call) and outer.func is attr):
        return False
    if attr.attr.value == "cuda":
        return True
    if attr.attr.value != "to":
        return False
    first = outer.args[0].value if outer.args and outer.args[0].keyword is None else None
    device = next((a.value for a in outer.args if a.keyword is not None and a.keyword.value == "device"), first)
    return device is not None and not _is_cpu(device)


def on_host(rule: Rule, node: cst.BaseExpression) -> bool:
    """Is the tensor ``node`` provably in host memory: ``x.cpu()``, ``x.detach().cpu()``,
    ``torch.from_numpy(a)``, a factory called without a device, or such a chain cast further
    (``x.cpu().float()``)?"""
    while True:
        if isinstance(node, cst.Call):
            func = node.func
            qualified = call_qualname(rule, node)
            if qualified in _FACTORIES:
                device = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "device"), None)
                return device is None or _is_cpu(device)
            if isinstance(func, cst.Attribute) and qualified is None:
                if func.attr.value in _TO_HOST:
                    return True
                if func.attr.value == "to" and _names_cpu(node):
                    return True
                node = func.value
                continue
            return False
        if isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT", "real", "imag", "data"):
            node = node.value
            continue
        if isinstance(node, cst.Subscript):
            node = node.value
            continue
        return False


def dtype_test_of(rule: Rule, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor whose dtype ``node`` is compared with (``w.dtype == torch.float8_e4m3fn``,
    ``x.dtype in (torch.float8_e4m3fn, ...)``), when that tensor is not provably on the host;
    None otherwise. A table of dtypes or a ``.cpu()`` tensor's test is not such a test."""
    chain = list(rule.context.ancestors)
    child: cst.CSTNode = node
    if chain and isinstance(chain[-1], cst.Element) and len(chain) >= 2 and isinstance(chain[-2], (cst.List, cst.Tuple, cst.Set)):
        child = chain[-2]
        chain = chain[:-2]
    if chain and isinstance(chain[-1], cst.ComparisonTarget):
        chain.pop()
    if not chain or not isinstance(chain[-1], cst.Comparison):
        return None
    comparison = chain[-1]
    sides = [comparison.left, *(t.comparator for t in comparison.comparisons)]
    for side in sides:
        if side is child or side is node:
            continue
        if isinstance(side, cst.Attribute) and side.attr.value == "dtype" and not on_host(rule, side.value):
            if isinstance(side.value, cst.Name) and _bound_on_host(rule, side.value.value):
                continue
            return side.value
    return None


def _bound_on_host(rule: Rule, name: str) -> bool:
    """Whether ``name``'s nearest earlier assignment in the blocks around the current node (up to
    its function) puts a host tensor there: trl's ``tensor = tensor.cpu()`` a line above
    ``if tensor.dtype in [torch.bfloat16, torch.float8_e4m3fn]:`` tests a host tensor. A
    compound statement that binds the name in between (an ``if`` / ``for``) leaves it unknown."""
    chain = list(rule.context.ancestors)
    for i in range(len(chain) - 2, -1, -1):
        block, statement = chain[i], chain[i + 1]
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)) or statement not in body:
            continue
        for earlier in reversed(body[: body.index(statement)]):
            if isinstance(earlier, cst.SimpleStatementLine):
                for small in reversed(earlier.body):
                    targets = _assigned_names(small)
                    if name in targets:
                        value = small.value if isinstance(small, cst.Assign) and len(small.targets) == 1 else None
                        return value is not None and on_host(rule, value)
            elif name in _bound_within(earlier):
                return False
    return False


def _assigned_names(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Assign):
        return {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    if isinstance(node, (cst.AnnAssign, cst.AugAssign)) and isinstance(node.target, cst.Name):
        return {node.target.value}
    return set()


def _bound_within(node: cst.CSTNode) -> set[str]:
    """Names a compound statement binds anywhere inside (assignments, loop and with targets)."""
    found: set[str] = set()

    class _Binds(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            found.update(_assigned_names(n))

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            found.update(_assigned_names(n))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            found.update(_assigned_names(n))

        def visit_For(self, n: cst.For) -> None:
            if isinstance(n.target, cst.Name):
                found.add(n.target.value)

        def visit_AsName(self, n: cst.AsName) -> None:
            if isinstance(n.name, cst.Name):
                found.add(n.name.value)

    node.visit(_Binds())
    return found


class DtypeBindings:
    """Names bound to a dtype literal in one scope (``dtype = torch.float64``), reported when the
    name reaches the device in that scope. A rule keeps one and calls ``bind``, ``use`` (on each
    Name it visits) and, when the module is left, ``reached`` for what to report."""

    def __init__(self) -> None:
        self._pending: dict[tuple[int, str], list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]] = {}
        self._used: set[tuple[int, str]] = set()
        self._scopes: list[object] = []  # kept alive: their ids key the table

    def bind(self, rule: Rule, name: str, node: cst.CSTNode) -> None:
        scope = rule.context.scope
        self._scopes.append(scope)
        self._pending.setdefault((id(scope), name), []).append((node, tuple(rule.context.ancestors)))

    def use(self, rule: Rule, node: cst.Name) -> None:
        if not self._pending:
            return
        key = (id(rule.context.scope), node.value)
        if key not in self._pending or key in self._used:
            return
        found = dtype_use(rule, node)
        if found is not None and found[0] == Use.DEVICE:
            self._used.add(key)

    def reached(self) -> list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
        return [entry for key in self._used for entry in self._pending[key]]
