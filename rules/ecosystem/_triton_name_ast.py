"""CN623's visitor (``cn623_triton_backend_name.py``) on CPython's ``ast``: its raw reports, whose
once per unit and silence where another rule reports are the engine's (``python/_ast_nets.py``).
Each check is its namesake in the rule's module read on the walk's ancestors (no ``Element``,
``DictElement`` or ``ComparisonTarget`` wrappers; an ``ArgNode`` between a call and an argument).
Unsure (the file goes to libcst): an implicit concatenation spelling the name (libcst reads each
part alone), a tuple written as a subscript's index (libcst's elements only in parentheses), a
report inside an f-string's placeholder (``AstDetector.reports``)."""

from __future__ import annotations

import ast

from cuda2neuron.core import Effort, Finding
from cuda2neuron.python import ArgNode, Unsure

from .._shared.detector import AstDetector
from .._shared.nets_ast import is_text
from .._shared.packages import _PACKAGE_PROBES
from ..device._strings_ast import literal_text, simple_string

__all__ = ["TritonNameDetector"]

_MODULES = "sys.modules"
_COLLECTIONS = (ast.List, ast.Tuple, ast.Set)


class TritonNameDetector(AstDetector):
    """``texts``: the rule's (names, message and command keywords, command runners, message,
    guidance, attributes holding an object's own name), handed over so that they live in one place."""

    def __init__(self, rule: type, file, texts: tuple) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self.names, self.skipped_keywords, self.runners, self.message, self.guidance, self.own_names = texts

    def findings(self) -> list[Finding] | None:
        return self.made_findings()

    def _finding(self, node: ast.AST, _ancestors: object) -> Finding:
        return self.finding(node, self.message, self.guidance, Effort.LOW)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or isinstance(self.ctx.parent, ast.JoinedStr):
            return  # bytes have no string value; an f-string's own text is no SimpleString
        text = literal_text(self.file, node)
        if not simple_string(self.file, node):
            if any(n in node.value or n in text for n in self.names):
                raise Unsure("an implicit concatenation: libcst reads each part alone")
            return
        if ("riton" not in text and "RITON" not in text) or node.value not in self.names:
            return
        ancestors = self.ctx.ancestors
        if is_text(ancestors, node) or self._probed_package(ancestors):
            return
        parent = ancestors[-1] if ancestors else None
        if isinstance(parent, ArgNode) and parent.keyword in self.skipped_keywords:
            return
        if self._module_key(ancestors) or self._names_an_entry(ancestors, node):
            return
        self._reports.append((node, tuple(ancestors)))

    def _probed_package(self, ancestors) -> bool:  # noqa: ANN001
        if len(ancestors) < 2 or not isinstance(ancestors[-1], ArgNode) or not isinstance(ancestors[-2], ast.Call):
            return False
        arg, call = ancestors[-1], ancestors[-2]
        args = self.ctx.args(call)
        if not args or args[0] is not arg or arg.keyword is not None:
            return False
        return self.ctx.call_qualname(call) in _PACKAGE_PROBES

    def _names_an_entry(self, above, node: ast.AST) -> bool:  # noqa: ANN001
        if not above:
            return False
        parent = above[-1]
        if isinstance(parent, ast.Dict):
            return any(k is node for k in parent.keys)
        if isinstance(parent, ast.BinOp):
            return isinstance(parent.op, ast.Div)
        if not isinstance(parent, _COLLECTIONS):
            return False
        collection = parent
        reader = above[-2] if len(above) >= 2 else None
        if isinstance(reader, ast.Subscript) and reader.slice is collection:
            raise Unsure("a tuple as a subscript's index: libcst's elements if written in parentheses")
        if isinstance(reader, ArgNode) and len(above) >= 3 and isinstance(above[-3], ast.Call):
            func = above[-3].func
            if (
                isinstance(func, ast.Attribute) and func.attr in ("startswith", "endswith")
                and isinstance(func.value, ast.Attribute) and func.value.attr in self.own_names
            ):
                return True  # the visitor's: the packages a log record comes from
            return self.ctx.call_qualname(above[-3]) in self.runners
        if isinstance(reader, ast.Compare) and any(c is collection for c in reader.comparators):
            op = reader.ops[next(i for i, c in enumerate(reader.comparators) if c is collection)]
            return not isinstance(op, (ast.In, ast.NotIn)) or len(collection.elts) > 1
        return True

    def _module_key(self, ancestors) -> bool:  # noqa: ANN001
        qualname = self.ctx.qualname
        for above in reversed(ancestors):
            if isinstance(above, ast.Subscript):
                return qualname(above.value) == _MODULES
            if isinstance(above, ast.Call):
                if isinstance(above.func, ast.Attribute) and qualname(above.func.value) == _MODULES:
                    return True
                if qualname(above.func) == "types.ModuleType":
                    return True
                args = self.ctx.args(above)
                return bool(args) and qualname(args[0].value) == _MODULES
            if isinstance(above, ast.Compare):
                return any(
                    isinstance(op, (ast.In, ast.NotIn)) and qualname(c) == _MODULES for op, c in zip(above.ops, above.comparators)
                )
        return False
