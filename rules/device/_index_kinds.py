"""What the argument of ``.cuda(x)`` may hold: None, an int, or something the file does not say.

``.cuda()`` and ``.cuda(None)`` mean the *current* CUDA device, ``.cuda(1)`` device 1. The port
writes ``.to(...)``, which reads None as "do not move" and a string ``"neuron:None"`` not at
all: ``.cuda(args.gpu)`` with ``parser.add_argument("--gpu", default=None, type=int)`` became
``.to(f"neuron:{args.gpu}")`` and raised on the default. What the file itself says decides:

* a literal (``None``, ``0``);
* a command-line option of the same file (``add_argument("--gpu", type=int, default=None)``:
  its ``type=`` and ``default=``; without ``type=int`` a value given on the command line is a
  string);
* a parameter of the enclosing function (its default, its annotation);
* a guard around the call: ``if args.gpu is not None:`` (or the ``else`` of ``is None``) rules
  None out.

An attribute or subscript the file does not define (``cfg.gpu``, ``opts["gpu"]``) is unknown:
configuration values are often None. A plain name without a visible definition is taken for an
index, as the device index of a worker (``def worker(rank): x.cuda(rank)``) is.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import libcst as cst

from cuda2neuron.python import RuleContext, visit_syntax

from .._shared.args import arg_by_name

__all__ = ["IndexKind", "index_kind"]


class IndexKind(enum.Enum):
    INT = "int"  # an index: "neuron:{x}"
    INT_OR_NONE = "int or None"  # torch.device("neuron", x): None is the current device
    NONE_OR_UNKNOWN = "None or unknown"  # may be None, else not known to be an int
    UNKNOWN = "unknown"


# Calls that return a device index (``.cuda(torch.cuda.current_device())``, a rank).
_INT_CALLS = frozenset({
    "torch.cuda.current_device", "torch.accelerator.current_device_index", "torch.distributed.get_rank",
    "torch.distributed.get_local_rank", "torch.distributed.get_node_local_rank",
})


def _literal(node: cst.BaseExpression | None) -> str | None:
    """'none', 'int', 'str' or 'other' for a literal default; None for no default."""
    if node is None:
        return None
    if isinstance(node, cst.Name) and node.value == "None":
        return "none"
    if isinstance(node, cst.Integer) or (
        isinstance(node, cst.UnaryOperation) and isinstance(node.expression, cst.Integer)
    ):
        return "int"
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "str"
    return "other"


def _kind(type_: str | None, default: str | None) -> IndexKind:
    """From a declared type (``int``, ``optional-int``, other) and a default's literal kind."""
    if type_ == "optional-int":
        return IndexKind.INT_OR_NONE if default in (None, "none", "int") else IndexKind.UNKNOWN
    if type_ == "int":
        if default == "int":
            return IndexKind.INT
        return IndexKind.INT_OR_NONE if default in (None, "none") else IndexKind.UNKNOWN
    if type_ is None and default == "int":
        return IndexKind.INT
    return IndexKind.NONE_OR_UNKNOWN if default in (None, "none") else IndexKind.UNKNOWN


def _option_dest(call: cst.Call) -> str | None:
    dest = arg_by_name(call, "dest")
    if dest is not None and isinstance(dest.value, cst.SimpleString):
        value = dest.value.evaluated_value
        return value if isinstance(value, str) else None
    names = [
        a.value.evaluated_value
        for a in call.args
        if a.keyword is None and isinstance(a.value, cst.SimpleString)
    ]
    longs = [n for n in names if isinstance(n, str) and n.startswith("--")]
    chosen = longs[0] if longs else (names[0] if names and isinstance(names[0], str) else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None


class _Options(cst.CSTVisitor):
    """The command-line options a file declares: dest -> IndexKind (the first declaration)."""

    def __init__(self) -> None:
        self.kinds: dict[str, IndexKind] = {}
        # Names the file assigns the parsed options to (``args = parser.parse_args()``): only
        # their attributes are options (``cfg.gpu`` is not ``--gpu``).
        self.receivers: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
            return
        if value.func.attr.value not in ("parse_args", "parse_known_args"):
            return
        for target in node.targets:
            first = target.target
            if isinstance(first, (cst.Tuple, cst.List)) and first.elements:
                first = first.elements[0].value
            if isinstance(first, cst.Name):
                self.receivers.add(first.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
            return
        dest = _option_dest(node)
        if dest is None or dest in self.kinds:
            return
        type_arg = arg_by_name(node, "type")
        action = arg_by_name(node, "action")
        if action is not None:
            self.kinds[dest] = IndexKind.UNKNOWN
            return
        type_ = None
        if type_arg is not None:
            type_ = "int" if isinstance(type_arg.value, cst.Name) and type_arg.value.value == "int" else "other"
        default = arg_by_name(node, "default")
        self.kinds[dest] = _kind(type_, _literal(default.value if default is not None else None))


def _options(context: RuleContext) -> _Options | None:
    """The file's options, read once per pass (None where the file declares none)."""
    memo = context.__dict__.get("_cli_index_options", False)
    if memo is False:
        memo = None
        if "add_argument" in context.source:
            memo = _Options()
            visit_syntax(context.module, memo)
        context.__dict__["_cli_index_options"] = memo
    return memo


def _annotation(node: cst.Annotation | None) -> str | None:
    if node is None:
        return None
    code = cst.Module([]).code_for_node(node.annotation).replace(" ", "")
    if code == "int":
        return "int"
    if code in ("Optional[int]", "typing.Optional[int]", "int|None", "None|int", "Union[int,None]"):
        return "optional-int"
    return "other"


def _parameter(name: str, ancestors: Sequence[cst.CSTNode]) -> IndexKind | None:
    for node in reversed(ancestors):
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            params = node.params
            for p in (*params.posonly_params, *params.params, *params.kwonly_params):
                if p.name.value == name:
                    annotation = _annotation(p.annotation) if isinstance(node, cst.FunctionDef) else None
                    default = _literal(p.default)
                    if annotation is None and default is None:
                        return IndexKind.INT  # a worker's index (``def worker(rank)``)
                    return _kind(annotation, default)
            return None
    return None


def _not_none(expr: cst.BaseExpression, ancestors: Sequence[cst.CSTNode], code) -> bool:  # noqa: ANN001
    """A guard around the call rules None out: ``if x is not None:`` or ``else`` of ``is None``."""
    text = code(expr)
    for i in range(len(ancestors) - 1, 0, -1):
        node, child = ancestors[i - 1], ancestors[i]
        if not isinstance(node, (cst.If, cst.IfExp)):
            continue
        test = node.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            continue
        target = test.comparisons[0]
        if not (isinstance(target.comparator, cst.Name) and target.comparator.value == "None"):
            continue
        if code(test.left) != text:
            continue
        if isinstance(target.operator, cst.IsNot) and child is node.body:
            return True
        if isinstance(target.operator, cst.Is) and child is node.orelse:
            return True
    return False


def index_kind(context: RuleContext, expr: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> IndexKind:
    """What ``expr``, the argument of ``.cuda(...)`` at the end of ``ancestors``, may hold."""
    kind = IndexKind.UNKNOWN
    if _literal(expr) == "int":
        return IndexKind.INT
    if isinstance(expr, cst.Call):
        func = expr.func
        if (isinstance(func, cst.Name) and func.value == "int") or context.qualname(func) in _INT_CALLS:
            return IndexKind.INT
        return IndexKind.UNKNOWN
    if isinstance(expr, cst.Name):
        found = _parameter(expr.value, ancestors)
        kind = IndexKind.INT if found is None else found
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        options = _options(context)
        if options is not None and expr.value.value in options.receivers and expr.attr.value in options.kinds:
            kind = options.kinds[expr.attr.value]
    if kind in (IndexKind.INT_OR_NONE, IndexKind.NONE_OR_UNKNOWN) and _not_none(expr, ancestors, context.code):
        kind = IndexKind.INT if kind is IndexKind.INT_OR_NONE else IndexKind.UNKNOWN
    return kind
