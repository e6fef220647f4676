"""What a rule can see while it visits a file: settings, scopes and ancestors."""

from __future__ import annotations

import libcst as cst

from ._names import Scope, dotted_name
from cuda2neuron.core import Settings

__all__ = ["MARK", "RuleContext"]

# Delimits a place token in a message (``RuleContext.mark``); no source text holds it.
MARK = "\x00"


class RuleContext:
    def __init__(self, path: str, module: cst.Module, settings: Settings, source: str | None = None) -> None:
        self.path = path
        self.module = module
        self.settings = settings
        self._source = source
        self._scope_stack: list[Scope] = [Scope(parent=None)]
        # Nodes from the module down to (excluding) the node being visited.
        self.ancestors: list[cst.CSTNode] = []
        # Nodes a message names by place (``mark``), by their token.
        self.marked: dict[str, cst.CSTNode] = {}

    def mark(self, node: cst.CSTNode) -> str:
        """A token for ``node``'s place in the file, written into a message or guidance and
        replaced by ``file:line`` when the finding is made (python/_lint.py). Trap: the line is
        not known during the walk, and a later round's module has moved lines (an added import);
        the engine locates the node in the file as read, through the fixes' lineage."""
        token = f"{MARK}{len(self.marked)}{MARK}"
        self.marked[token] = node
        return token

    @property
    def source(self) -> str:
        """The module's text, for rules that search the whole file for a word.

        ``module.code`` regenerates the text on every call (a tenth of a second for a few thousand
        lines), so it is made once per walk and shared; the first round gets the file as read.
        """
        if self._source is None:
            self._source = self.module.code
        return self._source

    @property
    def scope(self) -> Scope:
        return self._scope_stack[-1]

    # Called by the walker when it enters/leaves a function, lambda or class body.
    def push_scope(self, scope: Scope) -> None:
        self._scope_stack.append(scope)

    def pop_scope(self) -> None:
        self._scope_stack.pop()

    @property
    def parent(self) -> cst.CSTNode | None:
        return self.ancestors[-1] if self.ancestors else None

    def chain_above(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """The chain above ``node``, root first: ``node`` is the node being visited or one of its
        ancestors."""
        for i in range(len(self.ancestors) - 1, -1, -1):
            if self.ancestors[i] is node:
                return tuple(self.ancestors[:i])
        return tuple(self.ancestors)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        """Fully qualified name of a dotted expression, resolved through imports in scope.

        None when the head is not an import binding (a local, a parameter, a builtin) or the
        chain passes through a call or subscript.
        """
        return self.scope.qualify(dotted_name(node))

    def spell(
        self, qualified: str
    ) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
        """An expression for ``qualified`` valid at this point, and the imports it needs.

        Reuses the user's alias (``th.neuron`` after ``import torch as th``); otherwise spells the
        full name and asks for ``import <top>``. None if the top-level name is shadowed here.
        """
        parts = qualified.split(".")
        for cut in range(len(parts), 0, -1):
            prefix = ".".join(parts[:cut])
            local = self.scope.local_name_for(prefix)
            if local is not None:
                return _attr_chain([local, *parts[cut:]]), ()
        top = parts[0]
        if self.scope.lookup(top) is None and self.scope.bound_anywhere(top):
            return None
        return _attr_chain(parts), ((top, None),)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


def _attr_chain(parts: list[str]) -> cst.BaseExpression:
    expr: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr
