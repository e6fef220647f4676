"""The program pass: sites that are right line by line and wrong for the program move together.

A rule sees one site; the port changes what the program does on Trainium. After migrate, a
branch that ran on the GPU must run on Trainium, one that did not must not, and no code that
runs on Trainium may reach CUDA-only code. Two ways a set of right edits breaks that (issue 38),
both answered by growing ``Report.depends`` before ``link_groups`` (``_groups.py``) forms the
groups, so that the linked-fix machinery moves them together or not at all and names, in each
held finding, the lines that held it:

* **A value and its readers.** ``def load(device="cuda")`` retargeted to ``"neuron"`` while
  ``elif device == "cuda":`` further down stays (its branch holds code the tool cannot port): on
  Trainium the default path now ends in "Invalid device". ``flag = self.device == "cuda"``
  retargeted while the ``torch.cuda.set_sync_debug_mode(1)`` that ``if flag:`` guards stays a
  manual finding: the port calls ``torch.cuda`` on Trainium at its first step. So a report inside
  the value bound to a function's name (an assignment's value, a parameter's default) goes
  together with what reads the name in that function as a device: a test that asks about CUDA
  with it and the branch the test selects on CUDA (``selected_code``), or an f-string that spells
  a CUDA device with it (``f"cuda:{gpu}"``, while ``gpu = ... if dev.type == "cuda" else 0`` stays).
  A flag's reader may be an ``and``/``or`` outside any test (``fast = (not on_cuda) or
  torch.cuda...``: the right side runs by the flag), and a flag may be a function's return value
  bound at module level (``ON_GPU = _on_gpu()`` read by ``NEW_ARCH = ON_GPU and torch.cuda...``).
  A module's buffer binds as an attribute does (``self.register_buffer("inv_freq", ...)`` is
  read as ``self.inv_freq``), and an ``assert`` that asks about CUDA with the value reads it as a
  test does: it stops the program where it says no.
* **A message and its guard.** ``if not torch.cuda.is_available(): raise RuntimeError(f"...:
  {torch.cuda.is_available()}")``: the message reports the fact its test asks about. A report in a
  message (an f-string, a ``raise``, a print, warning or log call) under a test of a CUDA fact
  goes together with the test; where no report would move the test (it keeps CUDA on purpose in
  front of CUDA-only code, pinned by CN603 or suppressed), the message keeps it too: on Trainium
  the guard still asks about CUDA, and a message rewritten to Neuron would report the wrong fact.

Flow-insensitive on purpose (a name rebound further down links too: a held fix where a safe one
might have done, never the reverse). Linear in the module: each function that binds a reported
value is walked once, its reads indexed by name; each message walks its own ancestors.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from cuda2neuron.core import Effort, Report, Safety

from ._branches import selected_code
from ._device_truth import asks_cuda
from ._instance_stores import stored_on_instance
from ._names import dotted_name
from ._walk import visit_syntax

__all__ = ["link_program"]

# Calls whose arguments are text for a person: what they say follows the code they describe.
_MESSAGE_CALLS = frozenset(
    {"print", "warn", "warning", "info", "debug", "error", "exception", "critical", "fatal", "log"}
)
# Where a name is bound or declared rather than read.
_BINDINGS = (cst.AssignTarget, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName)
# Nodes that end the walk up from a value to the name it is bound to.
_STATEMENTS = (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.BaseSuite, cst.Lambda)

KEPT_WITH_GUARD = (
    "Not applied: the message describes the device test of the `if` it sits in, which keeps CUDA on "
    "Trainium (a guard in front of CUDA-only code, or a test left on purpose); rewrite them together."
)


def link_program(reports: Sequence[Report]) -> None:
    """Grow the ``depends`` of the reports whose meaning rides on code elsewhere in the module,
    and keep a message's fix with a guard that stays CUDA. Called by ``link_groups`` first."""
    if reports:
        _link_readers(reports)
        _follow_guards(reports)


# -- A value and its readers ---------------------------------------------------------------------


def _binding(report: Report) -> tuple[cst.FunctionDef | cst.ClassDef | cst.Module, frozenset[str]] | None:
    """Where the report's value is read and the names it is bound to: a parameter's default or
    an assignment to plain names inside a function (the function), an assignment to
    ``self.device`` in a method (the class), a command-line option's default (the module, read
    as ``args.device`` by any of its functions), a module-level function's return value (the
    module, read by the names it binds a call of the function to). None elsewhere (module and
    class level, where readers are other modules' business, and inside a lambda)."""
    chain = (*report.ancestors, report.node)
    for i in range(len(chain) - 2, -1, -1):
        anc, child = chain[i], chain[i + 1]
        if isinstance(anc, cst.Arg) and child is anc.value and i >= 1 and isinstance(chain[i - 1], cst.Call):
            # `self.register_buffer("inv_freq", torch.arange(..., device="cuda"))` in a method:
            # the class's methods read it as `self.inv_freq` (nanotron's rotary table asserts
            # its device in `__init__`).
            registered = _registered_on_self(chain[i - 1], anc)
            owner = _class(chain, i) if registered is not None else None
            if owner is not None:
                return owner, frozenset({registered})
        if isinstance(anc, cst.Arg) and _keyword(anc) in ("default", "choices") and child is anc.value and i >= 1:
            # `parser.add_argument("--device", default="cuda")`: every function of the module
            # reads it as `args.device` (`if args.device == "cuda":` in `setup(args)`). Its
            # `choices` go with those readers too: moved alone, `choices=["neuron", "cpu"]`
            # rejects the "cuda" default the held test still wants. Any other argument is a
            # value on its way to the statement that binds it: walk on.
            call, module = chain[i - 1], chain[0]
            dest = _option_dest(call) if isinstance(call, cst.Call) else None
            if dest is not None and isinstance(module, cst.Module):
                spaces = _namespaces(module)
                options = frozenset(f"{ns}.{dest}" for ns in spaces)
                return module, options | _copied_to_self(module, options) | _splatted_to_self(module, spaces, dest)
        if isinstance(anc, cst.Param):
            if child is not anc.default or i < 2 or not isinstance(chain[i - 2], cst.FunctionDef):
                return None
            return chain[i - 2], frozenset({anc.name.value})
        if isinstance(anc, cst.Return):
            # `def _on_gpu(): return torch.cuda.is_available() and ...` read as `ON_GPU = _on_gpu()`
            # at module level: the module's reads of `ON_GPU` read this value.
            owner = _function(chain, i)
            module = chain[0]
            at_top = isinstance(module, cst.Module) and any(owner is s for s in module.body)
            if child is not anc.value or owner is None or not at_top:
                return None
            results = _results_of(module, owner.name.value)
            return (module, results) if results else None
        if isinstance(anc, (cst.Assign, cst.AnnAssign)):
            if child is not anc.value:
                return None
            targets = [t.target for t in anc.targets] if isinstance(anc, cst.Assign) else [anc.target]
            names = frozenset(t.value for t in targets if isinstance(t, cst.Name))
            scope = _function(chain, i)
            if names and scope is not None:
                return scope, names
            # `self.device = "cuda"` in a method: the class's methods read `self.device`.
            attributes = frozenset(f"self.{t.attr.value}" for t in targets if _on_self(t))
            owner = _class(chain, i)
            if not attributes:
                # `runner = Runner(); runner.device = "cuda"`: the class's methods read it too.
                return stored_on_instance(chain[0], scope or chain[0], targets)
            return (owner, attributes) if owner is not None else None
        if isinstance(anc, _STATEMENTS):
            return None
    return None


def _kept_on_self(
    report: Report, scope: cst.FunctionDef | cst.ClassDef | cst.Module, names: frozenset[str]
) -> tuple[cst.ClassDef, frozenset[str]] | None:
    """``def __init__(self, device="cuda"): self.device = device``: the class's methods read the
    parameter's default as ``self.device``. verl's NIXL checkpoint engine tests ``if self.device
    == "cuda":`` in another method (a CuPy buffer, kept CUDA on purpose): the default moved alone
    sent the default path down the other branch. None where the value is not a method's
    parameter, or the method keeps none of ``names`` on ``self``."""
    if not isinstance(scope, cst.FunctionDef):
        return None
    chain = report.ancestors
    k = next((k for k in range(len(chain) - 1, 1, -1) if chain[k] is scope), None)
    if k is None or not isinstance(chain[k - 1], cst.IndentedBlock) or not isinstance(chain[k - 2], cst.ClassDef):
        return None
    copies = _SelfCopies(names)
    visit_syntax(scope.body, copies)
    return (chain[k - 2], frozenset(copies.found)) if copies.found else None


# How many base classes up a constructor's argument is followed (`super().__init__(device=device)`
# in a subclass of a subclass): enough for a runner's hierarchy, bounded for a cycle of names.
_MAX_BASES = 3


def _handed_to_base(
    report: Report, scope: cst.FunctionDef | cst.ClassDef | cst.Module, names: frozenset[str]
) -> list[tuple[cst.ClassDef, frozenset[str]]]:
    """``class BatchRunner(Runner): def __init__(self, device="cuda"): super().__init__(device=device)``:
    the base class (defined in the same module) keeps the parameter on ``self``, and its methods
    (and the subclass's, which inherit the attribute) read it as ``self.device``. timm's
    benchmark moved the subclasses' defaults while the base's ``if 'cuda' in self.device:``, which
    picks the clock that synchronizes, stayed: on Trainium every timing measured queued work.
    Each class with the attributes the parameter lands in; empty where the value is not a
    method's parameter or no base of the module takes it."""
    if not isinstance(scope, cst.FunctionDef):
        return []
    chain = report.ancestors
    k = next((k for k in range(len(chain) - 1, 1, -1) if chain[k] is scope), None)
    module = chain[0] if chain else None
    if k is None or not isinstance(module, cst.Module) or not isinstance(chain[k - 2], cst.ClassDef):
        return []
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    found: list[tuple[cst.ClassDef, frozenset[str]]] = []
    owner, method, held = chain[k - 2], scope, names
    for _ in range(_MAX_BASES):
        calls = _SuperCalls(method.name.value)
        visit_syntax(method.body, calls)
        base = next((classes.get(b.value.value) for b in owner.bases if isinstance(b.value, cst.Name)), None)
        target = _method(base, method.name.value) if base is not None else None
        if target is None or not calls.found:
            break
        params = {p for call in calls.found for p in _parameters_given(target, call, held)}
        if not params:
            break
        copies = _SelfCopies(frozenset(params))
        visit_syntax(target.body, copies)
        if copies.found:
            attributes = frozenset(copies.found)
            found += [(base, attributes), (chain[k - 2], attributes)]
        owner, method, held = base, target, frozenset(params)
    return found


def _method(owner: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = owner.body.body if isinstance(owner.body, cst.IndentedBlock) else ()
    return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _parameters_given(target: cst.FunctionDef, call: cst.Call, names: frozenset[str]) -> list[str]:
    """The parameters of ``target`` (a method: ``self`` first) that ``call`` hands one of
    ``names``, by keyword or by position."""
    positional = [p.name.value for p in (*target.params.posonly_params, *target.params.params)][1:]
    given: list[str] = []
    at = 0
    for arg in call.args:
        if arg.star:
            break  # `*args`: the positions after it are unknown
        if arg.keyword is None:
            if isinstance(arg.value, cst.Name) and arg.value.value in names and at < len(positional):
                given.append(positional[at])
            at += 1
        elif isinstance(arg.value, cst.Name) and arg.value.value in names:
            given.append(arg.keyword.value)
    return given


class _SuperCalls(cst.CSTVisitor):
    """The calls ``super().<name>(...)`` in a method (its base's version of the same method)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == self.name
            and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name)
            and func.value.func.value == "super"
        ):
            self.found.append(node)


# `nn.Module` methods that bind their second argument to `self.<first argument>`.
_REGISTRARS = frozenset({"register_buffer", "register_parameter"})


def _registered_on_self(call: cst.Call, arg: cst.Arg) -> str | None:
    """``self.<name>`` where ``arg`` is the value ``self.register_buffer("<name>", value)``
    binds; None for any other argument or call."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and _on_self(func) and func.attr.value in _REGISTRARS):
        return None
    positional = [a for a in call.args if a.keyword is None]
    name = positional[0].value if positional else None
    is_value = len(positional) > 1 and arg is positional[1] or _keyword(arg) in ("tensor", "param")
    if not is_value or not isinstance(name, cst.SimpleString):
        return None
    text = name.evaluated_value
    return f"self.{text}" if isinstance(text, str) and text.isidentifier() else None


def _results_of(module: cst.Module, function: str) -> frozenset[str]:
    """The names the module binds a call of its own ``function`` to (``ON_GPU = _on_gpu()``)."""
    names: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) and (
                isinstance(small.value.func, cst.Name) and small.value.func.value == function
            ):
                names.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
    return frozenset(names)


def _keyword(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


def _option_dest(call: cst.Call) -> str | None:
    """The attribute an ``add_argument("--device", ...)`` call stores its value in (``dest=``,
    else its first long option with dashes as underscores); None for any other call."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"):
        return None
    dest = next((a.value for a in call.args if _keyword(a) == "dest"), None)
    if isinstance(dest, cst.SimpleString):
        value = dest.evaluated_value
        return value if isinstance(value, str) and value.isidentifier() else None
    options = [a.value.evaluated_value for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
    long = next((o for o in options if isinstance(o, str) and o.startswith("--")), None)
    name = long[2:].replace("-", "_") if long else None
    return name if name and name.isidentifier() else None


# What a parsed namespace is called when it is handed around (`def setup(args)`, `opt = parse()`).
_NAMESPACES = frozenset({"args", "opt", "opts", "options", "cfg", "hparams", "flags", "FLAGS"})


def _namespaces(module: cst.Module) -> frozenset[str]:
    """The names a module's parsed arguments go by: the usual ones, and every name a
    ``parse_args()`` / ``parse_known_args()`` result is assigned to (``cli = p.parse_args()``)."""
    finder = _ParseResults()
    visit_syntax(module, finder)
    return _NAMESPACES | finder.names


def _copied_to_self(module: cst.Module, names: frozenset[str]) -> frozenset[str]:
    """``self.device`` for each ``self.device = args.device`` in the module: a trainer keeps the
    option on itself and its methods test it (``if self.device == "cuda":``)."""
    finder = _SelfCopies(names)
    visit_syntax(module, finder)
    return frozenset(finder.found)


def _splatted_to_self(module: cst.Module, spaces: frozenset[str], dest: str) -> frozenset[str]:
    """``self.device`` for each ``self.device = device`` in the module when the module turns its
    parsed namespace into keywords (``kwargs = vars(args).copy()``, then ``Runner(**kwargs)``):
    the option lands in every parameter named as it, and a class keeps it on itself. timm's
    benchmark handed ``--device`` to its runners so, whose ``if 'cuda' in self.device:`` picks
    the clock that synchronizes: the default moved alone timed queued work on Trainium. Only the
    copies onto ``self`` are followed (a plain ``device`` read is any function's own name)."""
    finder = _NamespaceSplats(spaces)
    visit_syntax(module, finder)
    return _copied_to_self(module, frozenset({dest})) if finder.found else frozenset()


class _NamespaceSplats(cst.CSTVisitor):
    """Whether the module calls ``vars(<namespace>)``."""

    def __init__(self, spaces: frozenset[str]) -> None:
        self.spaces = spaces
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if (
            isinstance(node.func, cst.Name) and node.func.value == "vars" and len(node.args) == 1
            and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value in self.spaces
        ):
            self.found = True


class _SelfCopies(cst.CSTVisitor):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.found: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        if _read_name(node.value) in self.names:
            self.found.update(f"self.{t.target.attr.value}" for t in node.targets if _on_self(t.target))


class _ParseResults(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in (
            "parse_args", "parse_known_args",
        ):
            for target in node.targets:
                names = [target.target] if isinstance(target.target, cst.Name) else [
                    e.value for e in getattr(target.target, "elements", ())[:1]
                ]
                self.names.update(n.value for n in names if isinstance(n, cst.Name))


def _on_self(target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"


def _class(chain: tuple[cst.CSTNode, ...], below: int) -> cst.ClassDef | None:
    """The class whose method holds ``chain[below]`` directly (not in a nested function)."""
    for k in range(below - 1, 1, -1):
        if isinstance(chain[k], cst.FunctionDef):
            owner = chain[k - 2]
            return owner if isinstance(chain[k - 1], cst.IndentedBlock) and isinstance(owner, cst.ClassDef) else None
        if isinstance(chain[k], (cst.ClassDef, cst.Lambda)):
            return None
    return None


def _function(chain: tuple[cst.CSTNode, ...], below: int) -> cst.FunctionDef | None:
    """The function whose local scope holds ``chain[below]``: None at module or class level."""
    for k in range(below - 1, -1, -1):
        if isinstance(chain[k], cst.FunctionDef):
            return chain[k]  # type: ignore[return-value]
        if isinstance(chain[k], (cst.ClassDef, cst.Lambda)):
            return None
    return None


class _Reads(cst.CSTVisitor):
    """The reads of ``names`` in a function that may decide something about the device: in the
    test of an ``if``/``while``/conditional expression (each with its ancestors, root first, for
    ``selected_code``), on the left of an ``and``/``or`` in an assignment or a return, or in an
    f-string. One fast walk; only the tests and values that mention a name are walked again."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.blocks: list[cst.CSTNode] = []  # the enclosing blocks: `selected_code` reads the one around an `if`
        self.found: dict[str, list[tuple[tuple[cst.CSTNode, ...], cst.CSTNode]]] = {}
        self.texts: dict[str, list[cst.FormattedString]] = {}
        # `safe = (not on_cuda) or torch.cuda.current_stream().query()`: the operands a name's
        # value decides whether to run, in an assignment or a return (not a test: see `_test`).
        self.operands: dict[str, list[cst.BaseExpression]] = {}
        # `assert self.inv_freq.device.type == "cuda"`: an assertion's test stops the program
        # where it says no, so it reads the value as a device test does.
        self.asserts: dict[str, list[cst.BaseExpression]] = {}

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self.blocks.pop()

    def _test(self, owner: cst.If | cst.While | cst.IfExp) -> None:
        if not _mentions(owner.test, self.names):
            return
        walk = _Chain(self.names)
        owner.test.visit(walk)  # small: a test, walked with its ancestors
        above = (self.blocks[-1], owner) if self.blocks else (owner,)
        for chain, read in walk.found:
            self.found.setdefault(_read_name(read) or "", []).append(((*above, *chain), read))

    def visit_If(self, node: cst.If) -> None:
        self._test(node)

    def visit_While(self, node: cst.While) -> None:
        self._test(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._test(node)

    def visit_Assert(self, node: cst.Assert) -> None:
        for name in _mentioned(node.test, self.names):
            self.asserts.setdefault(name, []).append(node.test)

    def _value(self, value: cst.BaseExpression | None) -> None:
        if value is not None and _mentions(value, self.names):
            walk = _Operands(self.names)
            visit_syntax(value, walk)  # small: one value that mentions a name
            for name, rest in walk.found:
                self.operands.setdefault(name, []).append(rest)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._value(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._value(node.value)

    def visit_Return(self, node: cst.Return) -> None:
        self._value(node.value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        for part in node.parts:
            if isinstance(part, cst.FormattedStringExpression):
                for name in _mentioned(part.expression, self.names):
                    self.texts.setdefault(name, []).append(node)


class _Operands(cst.CSTVisitor):
    """For each ``and``/``or`` whose left side reads one of ``names``, that name and the right
    side: Python runs the right side or not by the name's value (``ON_GPU and torch.cuda...``)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.found: list[tuple[str, cst.BaseExpression]] = []

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self.found.extend((name, node.right) for name in _mentioned(node.left, self.names))


class _Chain(cst.CSTVisitor):
    """The reads of ``names`` under a node, each with its ancestors below that node."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.stack: list[cst.CSTNode] = []
        self.found: list[tuple[tuple[cst.CSTNode, ...], cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        name = _read_name(node)
        if name is not None and name in self.names and (not self.stack or _reads(self.stack[-1], node)):
            self.found.append((tuple(self.stack), node))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


class _Names(cst.CSTVisitor):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.found: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.found.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        name = _read_name(node)
        if name is not None and name in self.names:
            self.found.add(name)
        visit_syntax(node.value, self)  # `x.device`: `device` is an attribute's name, not a read
        return False


def _read_name(node: cst.CSTNode) -> str | None:
    """How a read is named among the bound names: ``device``, ``self.device``, ``args.device``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return None


def _mentioned(node: cst.CSTNode, names: frozenset[str]) -> set[str]:
    finder = _Names(names)
    visit_syntax(node, finder)
    return finder.found


def _mentions(node: cst.CSTNode, names: frozenset[str]) -> bool:
    return bool(_mentioned(node, names))


def _reads(parent: cst.CSTNode, name: cst.CSTNode) -> bool:
    """Is ``name`` read here, rather than bound, a keyword or an attribute's name?"""
    if isinstance(parent, (cst.Attribute, cst.Arg)):
        return name is parent.value
    return not isinstance(parent, _BINDINGS)


def _reader_code(ancestors: tuple[cst.CSTNode, ...], read: cst.CSTNode, flag: bool) -> tuple[cst.CSTNode, ...]:
    """What a read in a test decides about the device: the test and the branch it selects on
    CUDA, where the test asks about CUDA with the value (``device == "cuda"``; any test of a
    ``flag`` computed from a CUDA fact). () for a test that asks something else (``if device:``).
    The other reads (``x.to(device)``, ``os.environ[...] = device``) pass the value on as it is:
    linking every statement that mentions it would hold unrelated fixes."""
    selected = selected_code(ancestors, read)
    return selected if selected and (flag or asks_cuda(selected[0])) else ()


def _spells_cuda(text: cst.FormattedString) -> bool:
    return any(isinstance(p, cst.FormattedStringText) and "cuda" in p.value for p in text.parts)


def _is_flag(report: Report) -> bool:
    """Is the value the report sits in a CUDA fact itself (``flag = self.device == "cuda"``,
    ``use_gpu = torch.cuda.is_available()``)? Then every test of the name asks about CUDA."""
    chain = (*report.ancestors, report.node)
    for i in range(len(chain) - 2, -1, -1):
        anc = chain[i]
        if isinstance(anc, (cst.Assign, cst.AnnAssign, cst.Param, cst.Return)):
            value = chain[i + 1]
            if isinstance(value, (cst.Comparison, cst.UnaryOperation, cst.BooleanOperation)):
                return True
            return isinstance(value, cst.Call) and asks_cuda(value.func) or (
                isinstance(value, cst.Attribute) and value.attr.value == "is_cuda"
            )
    return False


def _link_readers(reports: Sequence[Report]) -> None:
    bound: dict[int, tuple[cst.FunctionDef | cst.ClassDef | cst.Module, set[str], list[tuple[Report, frozenset[str]]]]] = {}
    for r in reports:
        if r.rule.advisory or r.rule.net:
            continue
        found = _binding(r)
        if found is None:
            continue
        for scope, names in filter(None, (found, _kept_on_self(r, *found), *_handed_to_base(r, *found))):
            entry = bound.setdefault(id(scope), (scope, set(), []))
            entry[1].update(names)
            entry[2].append((r, names))
    for scope, names, members in bound.values():
        visitor = _Reads(frozenset(names))
        visit_syntax(scope if isinstance(scope, cst.Module) else scope.body, visitor)
        for r, own in members:
            flag = _is_flag(r)
            reads = [(ancestors, read) for name in own for ancestors, read in visitor.found.get(name, ())]
            extra = [n for ancestors, read in reads for n in _reader_code(ancestors, read, flag)]
            # `f"cuda:{gpu}"` spells a CUDA device with the value.
            extra += [t for name in own for t in visitor.texts.get(name, ()) if _spells_cuda(t)]
            extra += [t for name in own for t in visitor.asserts.get(name, ()) if asks_cuda(t)]
            if flag:
                extra += [rest for name in own for rest in visitor.operands.get(name, ())]
            if extra:
                r.depends = (*r.depends, *extra)


# -- A message and its guard ---------------------------------------------------------------------


def _in_message(chain: tuple[cst.CSTNode, ...]) -> int | None:
    """The index in ``chain`` of the message the last node is part of: an f-string, a ``raise``,
    or a call that shows text (``print``, ``warnings.warn``, ``logger.info``); None if none is
    found before the statement ends."""
    for i in range(len(chain) - 2, -1, -1):
        anc = chain[i]
        if isinstance(anc, (cst.FormattedString, cst.Raise)):
            return i
        if isinstance(anc, cst.Call):
            name = dotted_name(anc.func)
            if name is not None and name.rsplit(".", 1)[-1] in _MESSAGE_CALLS:
                return i
        if isinstance(anc, _STATEMENTS):
            return None
    return None


def _guard(chain: tuple[cst.CSTNode, ...], below: int) -> cst.BaseExpression | None:
    """The test of the nearest ``if``/``while`` around ``chain[below]`` (in a branch, not in the
    test) that asks about CUDA, within the function."""
    for k in range(below - 1, -1, -1):
        anc = chain[k]
        if isinstance(anc, (cst.If, cst.While)) and chain[k + 1] is not anc.test and asks_cuda(anc.test):
            return anc.test
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
    return None


def _follow_guards(reports: Sequence[Report]) -> None:
    guarded: list[tuple[Report, cst.BaseExpression]] = []
    for r in reports:
        if r.replacement is None:
            continue
        chain = (*r.ancestors, r.node)
        at = _in_message(chain)
        test = _guard(chain, at) if at is not None else None
        if test is not None:
            guarded.append((r, test))
    if not guarded:
        return  # most modules: no message under a device test, and nothing more to build
    # The nodes some report sits on or under: a test among them has a finding that can move it.
    reported: set[int] = set()
    for r in reports:
        if not (r.rule.advisory or r.rule.net):
            reported.add(id(r.node))
            reported.update(id(a) for a in r.ancestors)
    for r, test in guarded:
        if id(test) in reported:
            r.depends = (*r.depends, test)
        elif r.safety is not Safety.DISPLAY_ONLY:
            r.safety = Safety.DISPLAY_ONLY
            r.guidance = f"{r.guidance} {KEPT_WITH_GUARD}".strip()
            if r.effort is Effort.NONE:
                r.effort = Effort.LOW
