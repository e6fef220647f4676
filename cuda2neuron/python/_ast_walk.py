"""The rule walk (``_walk``) over CPython's ``ast``: the same visits, order and scopes, no libcst.

A rule's detector (``Rule.detect``) reads the file through this walk and must yield the findings
its libcst visitor yields, byte for byte. So the walk reproduces what the libcst walk does,
where a rule can see it:

* **Order.** The libcst walk follows each node's dataclass fields, not the source: a function's
  body before its decorators, an ``a if c else b``'s test before its body, an argument's value
  before its keyword. Binding while walking (``_walk``'s docstring says why that is sound) makes
  the order visible: what a name resolves to, and whether a name bound to a dtype is used after
  the binding, depend on it. ``_CHILDREN`` spells libcst's order per ``ast`` type.
* **Scopes.** The same ``Scope`` objects (``_scopes``), bound by the same events: module imports
  first (also inside top-level ``if`` / ``try`` / ``with`` blocks, but not one written on the
  header's line: libcst's suite there is no ``IndentedBlock``), then assignment targets before
  their values, loop and ``with`` targets, ``except ... as``, ``global``; a scope per function,
  lambda and class body, none per comprehension.
* **Arguments.** libcst wraps each argument in an ``Arg``, in source order, positional and
  keyword alike; ``ast`` splits them and drops the keyword's ``Name``. ``ArgNode`` is that
  wrapper, and ``KeywordName`` the keyword's name, visited as libcst visits it (CN801's binding
  use looks at every ``Name``: ``torch.zeros(3, dtype=x, device=d)`` uses a name ``dtype``).
  Other names that are no expression in ``ast`` (a function's, a parameter's, an attribute's
  member, an import's) are not visited: no rule with a detector reads them.
* **Positions.** ``ast`` counts columns in UTF-8 bytes, findings in code points; ``AstFile``
  converts. Names are NFKC-normalized by CPython and kept as written by libcst: a non-ASCII
  identifier, or an ASCII one written otherwise, makes the walk ``Unsure``.

Where the trees cannot be matched exactly (a ``match`` statement, a coding cookie other than
UTF-8, a byte-order mark, a nesting the interpreter's stack cannot walk) the walk raises
``Unsure`` and the file goes to libcst: a detector never guesses.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Iterator, Sequence

from cuda2neuron.core import Span, parse_kept

from ._scopes import LOCAL, Scope

__all__ = [
    "ArgNode", "AstFile", "AstWalk", "KeywordName", "Unsure", "dotted_name", "generated_text", "record_edit", "walk_ast",
    "written_bounds",
]


class Unsure(Exception):
    """The ``ast`` walk cannot tell what the libcst walk would see here: parse with libcst."""


# PEP 263: a coding declaration in the first two lines. Only UTF-8 is read here: CPython gives
# columns in the UTF-8 bytes of the decoded line, libcst reads the file in its own encoding.
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)
_UTF8 = frozenset({"utf-8", "utf8", "utf_8"})
_NEWLINE = re.compile(r"\r\n|\r|\n")


class AstFile:
    """One Python file as CPython reads it: its text, its tree, and positions in finding units."""

    def __init__(self, path: str, data: bytes, text: str, tree: ast.Module) -> None:
        self.path = path
        self.data = data
        self.text = text
        self.tree = tree
        self._starts: list[int] | None = None
        self._foreign_lines: set[int] | None = None
        # Per fix a detector built (``id(fix)``): the text offsets it replaces, the parentheses
        # libcst gives the node included, and the text written there instead, as the file's
        # own lines hold it (``record_edit``). What the span path (kinds/_span_path.py) splices.
        self.edits: dict[int, tuple[int, int, str]] = {}
        # The nodes each span ``span`` made was made for: how the engine finds a finding's node
        # again, for the safety nets' filter (``_ast_nets.net_filtered``).
        self.spanned: dict[Span, list[ast.AST]] = {}
        # The findings that fence code off from the other rules (``_ast_fences.record_fence``).
        self.fences: list = []

    @classmethod
    def read(cls, path: str, data: bytes, keep: bool = False) -> AstFile | None:
        """The file parsed by CPython, or None where its positions could not be matched with
        libcst's (not UTF-8, a byte-order mark, another coding) or it does not parse. ``keep``:
        the tree is kept for the residual pass of the same text (``core.parse_kept``), as the
        splicer's is: the span path's last round reads the file the residual pass reads next."""
        if data.startswith(b"\xef\xbb\xbf"):
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        for match in _COOKIE.finditer(text, 0, _second_line_end(text)):
            if match.group(1).lower() not in _UTF8:
                return None
        try:
            if keep:
                tree = parse_kept(text)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # the libcst path reports it (or reads syntax newer than this interpreter's)
        return cls(path, data, text, tree)

    @property
    def source(self) -> str:
        """The text, under the name ``RuleContext.source`` gives it."""
        return self.text

    # -- positions ----------------------------------------------------------------------------
    def _line_starts(self) -> list[int]:
        if self._starts is None:
            # Lines end at LF, CRLF or a lone CR, as libcst's spans count them (and CPython's
            # tokenizer reads them).
            self._starts = [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
        return self._starts

    def offset(self, line: int, col: int) -> int:
        """The text offset (code points) of ``ast``'s ``line`` (1-based) and ``col`` (bytes)."""
        starts = self._line_starts()
        start = starts[line - 1]
        end = starts[line] if line < len(starts) else len(self.text)
        text = self.text[start:end]
        if text.isascii():
            return start + col
        return start + len(text.encode("utf-8")[:col].decode("utf-8"))

    def column(self, line: int, col: int) -> int:
        return self.offset(line, col) - self._line_starts()[line - 1]

    def span(self, node: ast.AST | KeywordName) -> Span:
        span = Span(
            node.lineno,  # type: ignore[union-attr]
            self.column(node.lineno, node.col_offset),  # type: ignore[union-attr]
            node.end_lineno,  # type: ignore[union-attr]
            self.column(node.end_lineno, node.end_col_offset),  # type: ignore[union-attr, arg-type]
        )
        if isinstance(node, ast.AST):
            named = self.spanned.setdefault(span, [])
            if not any(n is node for n in named):
                named.append(node)
        return span

    def segment(self, node: ast.AST) -> str:
        """``node``'s text, as ``ast.get_source_segment`` gives it, from the file's line starts
        (``get_source_segment`` splits the whole text again on every call: on diffusers CN109's
        f-string reads cost 37 s in it)."""
        start, end = self.bounds(node)
        return self.text[start:end]

    def bounds(self, node: ast.AST | KeywordName) -> tuple[int, int]:
        """``node``'s text offsets, start and end (its own parentheses excluded, as in ``span``)."""
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[union-attr]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[union-attr, arg-type]
        )

    def _has_foreign(self, line: int) -> bool:
        """Does line ``line`` hold a character outside ASCII?"""
        if self._foreign_lines is None:
            if self.text.isascii():
                self._foreign_lines = set()
            else:
                starts = self._line_starts()
                self._foreign_lines = {
                    i + 1
                    for i, start in enumerate(starts)
                    if not self.text[start : starts[i + 1] if i + 1 < len(starts) else len(self.text)].isascii()
                }
        return line in self._foreign_lines

    def check_written(self, name: str, line: int, col: int) -> None:
        """``name`` (an identifier CPython read at ``line``/``col``, bytes) is written so in the
        text, as libcst keeps it; else ``Unsure`` (CPython folds ``ｔｏｒｃｈ`` to ``torch``)."""
        if not name.isascii():
            raise Unsure(f"non-ASCII identifier {name!r}")
        if self._has_foreign(line):
            at = self.offset(line, col)
            if self.text[at : at + len(name)] != name:
                raise Unsure(f"identifier {name!r} written with other characters")

    def check_line(self, line: int) -> None:
        """The names of a statement at ``line`` whose positions ``ast`` does not give: ``Unsure``
        when that line holds a character outside ASCII (one of them may be NFKC-folded)."""
        if self._has_foreign(line):
            raise Unsure("a non-ASCII line with names ast gives no position for")


def _second_line_end(text: str) -> int:
    first = _NEWLINE.search(text)
    if first is None:
        return len(text)
    second = _NEWLINE.search(text, first.end())
    return len(text) if second is None else second.end()


class ArgNode:
    """An argument of a call, as libcst's ``Arg`` holds it: its value (a starred argument's
    value without the star), its keyword (None for a positional or ``**`` argument) and its star
    (``""``, ``"*"``, ``"**"``)."""

    __slots__ = ("keyword", "source", "star", "value")

    def __init__(self, value: ast.expr, keyword: str | None, star: str, source: ast.AST) -> None:
        self.value = value
        self.keyword = keyword
        self.star = star
        self.source = source  # the ast node written for it: the expression, Starred or keyword


class KeywordName:
    """The keyword of a keyword argument, the ``Name`` libcst visits after the argument's value."""

    __slots__ = ("col_offset", "end_col_offset", "end_lineno", "id", "lineno")

    def __init__(self, keyword: ast.keyword) -> None:
        self.id: str = keyword.arg  # type: ignore[assignment]
        self.lineno = keyword.lineno
        self.col_offset = keyword.col_offset
        self.end_lineno = keyword.lineno
        self.end_col_offset = keyword.col_offset + len(self.id)  # checked to be ASCII


def dotted_name(node: object) -> str | None:
    """``a.b.c`` for a pure Name/Attribute chain (``_names.dotted_name`` on ``ast``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, KeywordName):
        parts.append(node.id)
    else:
        return None
    return ".".join(reversed(parts))


class AstWalk:
    """What a detector sees while the walk visits a node: the file, the ancestors (root first,
    ``ArgNode`` between a call and its argument's value), the scope and name resolution."""

    def __init__(self, file: AstFile) -> None:
        self.file = file
        self.path = file.path
        self.source = file.text
        self.ancestors: list[object] = []
        self._scopes: list[Scope] = [Scope(parent=None)]
        self._args: dict[int, list[ArgNode]] = {}
        # Callees resolved once per call node, as ``rules/_shared/names.call_qualname`` memoizes
        # them on the libcst context (the first answer stands for the whole walk).
        self.call_qualnames: dict[int, str | None] = {}
        self.fstrings = 0  # how many f-strings the node being visited is inside

    @property
    def scope(self) -> Scope:
        return self._scopes[-1]

    @property
    def parent(self) -> object | None:
        return self.ancestors[-1] if self.ancestors else None

    def qualname(self, node: object) -> str | None:
        """``RuleContext.qualname`` on ``ast``: resolved through the imports in scope."""
        return self.scope.qualify(dotted_name(node))

    def call_qualname(self, call: ast.Call) -> str | None:
        key = id(call)
        if key in self.call_qualnames:
            return self.call_qualnames[key]
        qualified = self.qualname(call.func)
        self.call_qualnames[key] = qualified
        return qualified

    def args(self, call: ast.Call) -> list[ArgNode]:
        """``call``'s arguments in source order, as libcst's ``Call.args``."""
        found = self._args.get(id(call))
        if found is None:
            found = self._args[id(call)] = _call_args(call)
        return found


def _call_args(call: ast.Call) -> list[ArgNode]:
    args = [
        ArgNode(a.value, None, "*", a) if isinstance(a, ast.Starred) else ArgNode(a, None, "", a) for a in call.args
    ]
    args += [ArgNode(k.value, k.arg, "" if k.arg is not None else "**", k) for k in call.keywords]
    if call.keywords and call.args:
        # `f(*a, b=1, *c)`: ast lists the starred argument among the positional ones.
        args.sort(key=lambda a: (a.source.lineno, a.source.col_offset))  # type: ignore[attr-defined]
    return args


# -- the walk -------------------------------------------------------------------------------


def walk_ast(walk: AstWalk, visitor: object) -> None:
    """Walk ``walk``'s file calling ``visitor``'s ``visit_<Type>`` / ``leave_<Type>`` (``ast``
    type names, plus ``KeywordName``) as ``_walk.walk_rules`` calls a rule's; ``walk`` is what
    the visitor reads meanwhile (scope, ancestors). Raises ``Unsure``."""
    file = walk.file
    walker = _Walker(walk, visitor)
    try:
        _prebind(file, file.tree.body, walk.scope)
        walker.walk(file.tree)
    except RecursionError:
        raise Unsure("nesting deeper than the interpreter's stack") from None


class _Walker:
    def __init__(self, walk: AstWalk, visitor: object) -> None:
        self.ctx = walk
        self.visitor = visitor
        self._visits: dict[type, tuple[Callable | None, Callable | None]] = {}

    def _handlers(self, t: type) -> tuple[Callable | None, Callable | None]:
        found = self._visits.get(t)
        if found is None:
            name = t.__name__
            found = self._visits[t] = (
                getattr(self.visitor, f"visit_{name}", None),
                getattr(self.visitor, f"leave_{name}", None),
            )
        return found

    def walk(self, node: object) -> None:
        t = type(node)
        visit, leave = self._handlers(t)
        if visit is not None:
            visit(node)
        binder = _BINDERS.get(t)
        if binder is not None:
            binder(self.ctx, node)
        ancestors = self.ctx.ancestors
        ancestors.append(node)
        children = _CHILDREN.get(t)
        if children is None:
            raise Unsure(f"{t.__name__} is not walked")
        children(self, node)
        ancestors.pop()
        if leave is not None:
            leave(node)

    def each(self, nodes: Sequence[object | None]) -> None:
        for node in nodes:
            if node is not None:
                self.walk(node)

    def body(self, owner: ast.AST, nodes: Sequence[ast.AST] | ast.AST, scope: Scope) -> None:
        """A function's, lambda's or class's body, in its own scope."""
        self.ctx._scopes.append(scope)
        if isinstance(nodes, ast.AST):
            self.walk(nodes)
        else:
            self.each(nodes)
        self.ctx._scopes.pop()

    def parameters(self, args: ast.arguments) -> None:
        # libcst's Parameters: params, star_arg, kwonly_params, star_kwarg, posonly_params; each
        # Param: name (not visited here), annotation, default.
        positional = [*args.posonlyargs, *args.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        default_of = {id(a): d for a, d in zip(positional, defaults)}
        for a in args.args:
            self._param(a, default_of[id(a)])
        if args.vararg is not None:
            self._param(args.vararg, None)
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            self._param(a, d)
        if args.kwarg is not None:
            self._param(args.kwarg, None)
        for a in args.posonlyargs:
            self._param(a, default_of[id(a)])

    def _param(self, arg: ast.arg, default: ast.expr | None) -> None:
        self.ctx.file.check_written(arg.arg, arg.lineno, arg.col_offset)
        self.ctx.ancestors.append(arg)
        if arg.annotation is not None:
            self.walk(arg.annotation)
        if default is not None:
            self.walk(default)
        self.ctx.ancestors.pop()


def _function_scope(args: ast.arguments, parent: Scope) -> Scope:
    scope = Scope(parent=parent)
    for group in (args.posonlyargs, args.args, args.kwonlyargs):
        for a in group:
            scope.bind(a.arg, LOCAL)
    for star in (args.vararg, args.kwarg):
        if star is not None:
            scope.bind(star.arg, LOCAL)
    return scope


def _function(w: _Walker, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    w.parameters(node.args)
    w.body(node, node.body, _function_scope(node.args, w.ctx.scope))
    w.each(node.decorator_list)
    if node.returns is not None:
        w.walk(node.returns)


def _class(w: _Walker, node: ast.ClassDef) -> None:
    w.body(node, node.body, Scope(parent=w.ctx.scope, is_class=True))
    w.each(node.bases)
    w.each([k.value for k in node.keywords])
    w.each(node.decorator_list)


def _lambda(w: _Walker, node: ast.Lambda) -> None:
    w.parameters(node.args)
    w.body(node, node.body, _function_scope(node.args, w.ctx.scope))


def _assign(w: _Walker, node: ast.Assign) -> None:
    # Each target is bound when libcst's AssignTarget is visited: before it is walked, and
    # before the value.
    for target in node.targets:
        _bind_target(target, w.ctx.scope)
        w.walk(target)
    w.walk(node.value)


def _call(w: _Walker, node: ast.Call) -> None:
    w.walk(node.func)
    ancestors = w.ctx.ancestors
    for arg in w.ctx.args(node):
        ancestors.append(arg)
        w.walk(arg.value)
        if arg.keyword is not None:
            keyword = KeywordName(arg.source)  # type: ignore[arg-type]
            w.ctx.file.check_written(keyword.id, keyword.lineno, keyword.col_offset)
            w.walk(keyword)
        ancestors.pop()


def _dict(w: _Walker, node: ast.Dict) -> None:
    for key, value in zip(node.keys, node.values):
        if key is not None:
            w.walk(key)
        w.walk(value)


def _comprehensions(w: _Walker, generators: list[ast.comprehension]) -> None:
    for g in generators:
        w.walk(g.target)
        w.walk(g.iter)
        w.each(g.ifs)


def _joined(w: _Walker, node: ast.JoinedStr) -> None:
    w.ctx.fstrings += 1
    w.each(node.values)
    w.ctx.fstrings -= 1


def _try(w: _Walker, node: ast.Try) -> None:
    w.each(node.body)
    for handler in node.handlers:
        w.walk(handler)
    w.each(node.orelse)
    w.each(node.finalbody)


def _name(w: _Walker, node: ast.Name) -> None:
    w.ctx.file.check_written(node.id, node.lineno, node.col_offset)


def _attribute(w: _Walker, node: ast.Attribute) -> None:
    w.walk(node.value)
    file = w.ctx.file
    if not node.attr.isascii():
        raise Unsure(f"non-ASCII attribute {node.attr!r}")
    if file._has_foreign(node.end_lineno):  # type: ignore[arg-type]
        at = file.offset(node.end_lineno, node.end_col_offset)  # type: ignore[arg-type]
        if file.text[at - len(node.attr) : at] != node.attr:
            raise Unsure(f"attribute {node.attr!r} written with other characters")


def _import(w: _Walker, node: ast.Import | ast.ImportFrom) -> None:
    for alias in node.names:
        if not alias.name.isascii() or not (alias.asname or "").isascii():
            raise Unsure("non-ASCII import name")
    w.ctx.file.check_line(node.lineno)


def _fields(*names: str) -> Callable[[_Walker, ast.AST], None]:
    """Walk the fields ``names`` of a node, in that order (lists item by item)."""

    def children(w: _Walker, node: ast.AST) -> None:
        for name in names:
            value = getattr(node, name)
            if value is None:
                continue
            if isinstance(value, list):
                w.each(value)
            else:
                w.walk(value)

    return children


def _nothing(w: _Walker, node: object) -> None:
    return None


def _unsure(w: _Walker, node: object) -> None:
    raise Unsure(f"{type(node).__name__} is not walked like libcst")


def _checked_line(w: _Walker, node: ast.stmt) -> None:
    w.ctx.file.check_line(node.lineno)


def _handler(w: _Walker, node: ast.ExceptHandler) -> None:
    if node.name is not None:
        w.ctx.file.check_line(node.lineno)
    w.each(node.body)
    if node.type is not None:
        w.walk(node.type)


def _defined(w: _Walker, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
    if getattr(node, "type_params", None):
        raise Unsure("type parameters")
    w.ctx.file.check_line(node.lineno)
    if isinstance(node, ast.ClassDef):
        _class(w, node)
    else:
        _function(w, node)


# Per ast type: its children in the order libcst's dataclass fields give them (``_walk``).
_CHILDREN: dict[type, Callable] = {
    ast.Module: _fields("body"),
    ast.FunctionDef: _defined,
    ast.AsyncFunctionDef: _defined,
    ast.ClassDef: _defined,
    ast.Return: _fields("value"),
    ast.Delete: _fields("targets"),
    ast.Assign: _assign,
    ast.AugAssign: _fields("target", "value"),
    ast.AnnAssign: _fields("target", "annotation", "value"),
    ast.For: _fields("target", "iter", "body", "orelse"),
    ast.AsyncFor: _fields("target", "iter", "body", "orelse"),
    ast.While: _fields("test", "body", "orelse"),
    ast.If: _fields("test", "body", "orelse"),
    ast.With: _fields("items", "body"),
    ast.AsyncWith: _fields("items", "body"),
    ast.withitem: _fields("context_expr", "optional_vars"),
    ast.Raise: _fields("exc", "cause"),
    ast.Try: _try,
    ast.ExceptHandler: _handler,
    ast.Assert: _fields("test", "msg"),
    ast.Import: _import,
    ast.ImportFrom: _import,
    ast.Global: _checked_line,
    ast.Nonlocal: _checked_line,
    ast.Expr: _fields("value"),
    ast.Pass: _nothing,
    ast.Break: _nothing,
    ast.Continue: _nothing,
    ast.BoolOp: _fields("values"),
    ast.NamedExpr: _fields("target", "value"),
    ast.BinOp: _fields("left", "right"),
    ast.UnaryOp: _fields("operand"),
    ast.Lambda: _lambda,
    ast.IfExp: _fields("test", "body", "orelse"),
    ast.Dict: _dict,
    ast.Set: _fields("elts"),
    ast.ListComp: lambda w, n: (w.walk(n.elt), _comprehensions(w, n.generators)),
    ast.SetComp: lambda w, n: (w.walk(n.elt), _comprehensions(w, n.generators)),
    ast.GeneratorExp: lambda w, n: (w.walk(n.elt), _comprehensions(w, n.generators)),
    ast.DictComp: lambda w, n: (w.walk(n.key), w.walk(n.value), _comprehensions(w, n.generators)),
    ast.Await: _fields("value"),
    ast.Yield: _fields("value"),
    ast.YieldFrom: _fields("value"),
    ast.Compare: _fields("left", "comparators"),
    ast.Call: _call,
    ast.FormattedValue: _fields("value", "format_spec"),
    ast.JoinedStr: _joined,
    ast.Constant: _nothing,
    ast.Attribute: _attribute,
    ast.Subscript: _fields("value", "slice"),
    ast.Starred: _fields("value"),
    ast.Name: _name,
    ast.List: _fields("elts"),
    ast.Tuple: _fields("elts"),
    ast.Slice: _fields("lower", "upper", "step"),
    KeywordName: _nothing,
    ast.Match: _unsure,
}
if hasattr(ast, "TryStar"):
    _CHILDREN[ast.TryStar] = _try  # type: ignore[attr-defined]


# -- binding (``_walk._BINDERS``) -------------------------------------------------------------


def _bind_target(target: ast.expr, scope: Scope) -> None:
    if isinstance(target, ast.Name):
        scope.bind(target.id, LOCAL)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _bind_target(element, scope)
    elif isinstance(target, ast.Starred):
        _bind_target(target.value, scope)


def _bind_import(node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname is not None:
                scope.bind(alias.asname, alias.name)
            else:
                top = alias.name.split(".")[0]
                scope.bind(top, top)
        return
    relative = node.level > 0 or node.module is None
    for alias in node.names:
        if alias.name == "*":
            return
        local = alias.asname if alias.asname is not None else alias.name.split(".")[0]
        # A relative import names the user's own module, never torch.
        scope.bind(local, LOCAL if relative else f"{node.module}.{alias.name}")


def _bind_global(ctx: AstWalk, node: ast.Global) -> None:
    ctx.scope.globals_.update(node.names)


_BINDERS: dict[type, Callable[[AstWalk, object], None]] = {
    ast.Import: lambda c, n: _bind_import(n, c.scope),  # type: ignore[arg-type]
    ast.ImportFrom: lambda c, n: _bind_import(n, c.scope),  # type: ignore[arg-type]
    ast.AnnAssign: lambda c, n: _bind_target(n.target, c.scope),  # type: ignore[attr-defined]
    ast.AugAssign: lambda c, n: _bind_target(n.target, c.scope),  # type: ignore[attr-defined]
    ast.For: lambda c, n: _bind_target(n.target, c.scope),  # type: ignore[attr-defined]
    ast.AsyncFor: lambda c, n: _bind_target(n.target, c.scope),  # type: ignore[attr-defined]
    ast.NamedExpr: lambda c, n: _bind_target(n.target, c.scope),  # type: ignore[attr-defined]
    ast.withitem: lambda c, n: n.optional_vars is not None and _bind_target(n.optional_vars, c.scope),  # type: ignore[attr-defined]
    ast.ExceptHandler: lambda c, n: n.name is not None and c.scope.bind(n.name, LOCAL),  # type: ignore[attr-defined]
    ast.FunctionDef: lambda c, n: c.scope.bind(n.name, LOCAL),  # type: ignore[attr-defined]
    ast.AsyncFunctionDef: lambda c, n: c.scope.bind(n.name, LOCAL),  # type: ignore[attr-defined]
    ast.ClassDef: lambda c, n: c.scope.bind(n.name, LOCAL),  # type: ignore[attr-defined]
    ast.Global: _bind_global,  # type: ignore[dict-item]
}


def _prebind(file: AstFile, body: Sequence[ast.stmt], scope: Scope) -> None:
    """``_walk._prebind_module_imports``: module-level imports, also inside top-level if / try /
    with blocks, bound before the walk."""
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _bind_import(stmt, scope)
        elif isinstance(stmt, (ast.If, ast.Try, ast.With, ast.AsyncWith)):
            for block in _blocks(stmt):
                if len(block) == 1 and isinstance(block[0], ast.If) and block is getattr(stmt, "orelse", None) and _is_elif(file, stmt, block[0]):
                    _prebind(file, block, scope)
                elif block and _indented(file, block[0]):
                    _prebind(file, block, scope)


def _blocks(stmt: ast.If | ast.Try | ast.With | ast.AsyncWith) -> Iterator[list[ast.stmt]]:
    yield stmt.body
    if isinstance(stmt, ast.If):
        if stmt.orelse:
            yield stmt.orelse
    elif isinstance(stmt, ast.Try):
        for handler in stmt.handlers:
            yield handler.body
        if stmt.orelse:
            yield stmt.orelse


def _is_elif(file: AstFile, stmt: ast.If, inner: ast.If) -> bool:
    """Is ``inner`` (the only statement of ``stmt``'s else branch) written ``elif``?"""
    start = file.offset(inner.lineno, inner.col_offset)
    return file.text.startswith("elif", start)


def _indented(file: AstFile, first: ast.stmt) -> bool:
    """Does the block whose first statement is ``first`` start on a line of its own (libcst's
    ``IndentedBlock``), not on its header's line (a ``SimpleStatementSuite``)?"""
    start = file.offset(first.lineno, first.col_offset)
    line_start = file._line_starts()[first.lineno - 1]
    return file.text[line_start:start].strip(" \t\f") == ""


# -- the text libcst generates for a node ----------------------------------------------------


def generated_text(file: AstFile, node: ast.AST, ancestors: Sequence[object], at: int, old: int, new: str) -> str:
    """What libcst's ``module.code_for_node`` generates for ``node`` (of the module as parsed)
    with the ``old`` characters at text offset ``at`` replaced by ``new``: a fix's replacement
    text (``(torch.float64)`` gives ``(torch.float32)``). Raises ``Unsure``.

    Two traps: the node's own parentheses are part of it (``written_bounds``), though not of its
    span; and a line break inside brackets is libcst whitespace that holds the block's
    indentation apart (``indent=True``) when the next line starts with it, and a node generated
    alone has no block: its continuation lines lose the indentation of the statement they sit in
    (a call wrapped inside a function body comes out less indented than written). A string or a
    backslash continuation across lines keeps its text: such a node is left to libcst.
    """
    start, end = written_bounds(file, node, ancestors)
    text = file.text[start:at] + new + file.text[at + old : end]
    if "\n" not in text and "\r" not in text:
        return text
    if "\\" in text:
        raise Unsure("a backslash in a node written across lines")
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Constant, ast.JoinedStr)) and inner.lineno != inner.end_lineno:
            raise Unsure("a string across lines")
    statement = next((a for a in reversed(ancestors) if isinstance(a, ast.stmt)), None)
    if statement is None:
        raise Unsure("no statement above the node")
    line_start = file._line_starts()[statement.lineno - 1]
    line = file.text[line_start : file.offset(statement.lineno, statement.col_offset)]
    indent = line[: len(line) - len(line.lstrip(" \t\f"))]
    if not indent:
        return text
    lines = _NEWLINE.split(text)
    breaks = _NEWLINE.findall(text)
    out = [lines[0]]
    for brk, rest in zip(breaks, lines[1:]):
        out.append(brk + (rest[len(indent) :] if rest.startswith(indent) else rest))
    return "".join(out)


def record_edit(file: AstFile, fix: object, node: ast.AST, ancestors: Sequence[object], at: int, old: int, new: str) -> None:
    """Note in ``file.edits`` what ``fix`` (built from ``generated_text`` with the same
    arguments) does to the text: the node's written bounds and the text that stands there after
    the replacement, the continuation lines' indentation kept as written (the module's code
    generation writes the node back inside its block; only ``code_for_node`` alone drops it)."""
    start, end = written_bounds(file, node, ancestors)
    file.edits[id(fix)] = (start, end, file.text[start:at] + new + file.text[at + old : end])


def written_bounds(file: AstFile, node: ast.AST, ancestors: Sequence[object]) -> tuple[int, int]:
    """The text offsets of ``node`` with the parentheses libcst attaches to it (``ast``
    positions exclude a node's parentheses, as do libcst's spans; its generated code does not).

    The parentheses around a node are its own unless its parent writes them: a call's (or
    class's) only argument sits in the call's. Raises ``Unsure`` where libcst may give them to
    the statement (``with (x):``) or a comment could hide one on a line above.
    """
    start, end = file.bounds(node)
    text = file.text
    opens: list[int] = []
    i = _back(text, start)
    while i > 0 and text[i - 1] == "(":
        opens.append(i - 1)
        i = _back(text, i - 1)
    closes: list[int] = []
    j = _forward(text, end)
    while j < len(text) and text[j] == ")":
        closes.append(j + 1)
        j = _forward(text, j + 1)
    own = min(len(opens), len(closes)) - (1 if _in_parents_parentheses(node, ancestors) else 0)
    if own <= 0:
        return start, end
    if ancestors and isinstance(ancestors[-1], ast.withitem):
        raise Unsure("parentheses a with statement may own")
    return opens[own - 1], closes[own - 1]


def _in_parents_parentheses(node: ast.AST, ancestors: Sequence[object]) -> bool:
    """Is ``node`` the only argument of a call or class, inside the parentheses it writes?"""
    if len(ancestors) >= 2 and isinstance(ancestors[-1], ArgNode) and isinstance(ancestors[-2], ast.Call):
        call = ancestors[-2]
        arg = ancestors[-1]
        return len(call.args) + len(call.keywords) == 1 and arg.keyword is None and not arg.star and arg.value is node
    if ancestors and isinstance(ancestors[-1], ast.ClassDef):
        owner = ancestors[-1]
        return len(owner.bases) + len(owner.keywords) == 1 and any(b is node for b in owner.bases)
    return False


def _back(text: str, i: int) -> int:
    """The offset after the last character before ``i`` that is no whitespace nor line break."""
    while i > 0:
        c = text[i - 1]
        if c in " \t\f":
            i -= 1
        elif c in "\r\n":
            nl = i - 1
            if c == "\n" and nl > 0 and text[nl - 1] == "\r":
                nl -= 1
            line_start = max(text.rfind("\n", 0, nl), text.rfind("\r", 0, nl)) + 1
            if "#" in text[line_start:nl]:
                raise Unsure("a comment may end the line above")
            i = nl
            if i > 0 and text[i - 1] == "\\":
                i -= 1
        else:
            break
    return i


def _forward(text: str, j: int) -> int:
    """The offset of the first character from ``j`` that is no whitespace, line break, line
    continuation or comment."""
    n = len(text)
    while j < n:
        c = text[j]
        if c in " \t\f\r\n":
            j += 1
        elif c == "\\" and j + 1 < n and text[j + 1] in "\r\n":
            j += 2
        elif c == "#":
            while j < n and text[j] not in "\r\n":
                j += 1
        else:
            break
    return j
