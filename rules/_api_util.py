"""Helpers private to the torch.cuda API (CN2xx) and AMP (CN3xx) rule families.

* The move table ``cuda_api.toml`` loaded once per process into frozen rows.
* ``is_reference`` — whether a ``Name`` node is a *use* of a name (not an import alias, an
  attribute's member name, a keyword or a binding): ``x.synchronize`` must not resolve the bare
  ``synchronize`` through ``from torch.cuda import synchronize``.
* ``import_to_drop`` — the from-import a rewrite may leave unused, for ``unused_imports``.
* ``aliased_members`` — ``as`` aliases of imported API names, for the rules' cheap Name filter;
  ``MemberReferences`` — the visitors built on it, shared by the torch.cuda member rules.
* ``dtype_expr`` / ``keyword_arg`` / ``as_keywords`` — node builders shared by the AMP rules.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst

from cuda2neuron.core import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pyproject pulls tomli on 3.10
    import tomli as tomllib

__all__ = [
    "MemberReferences",
    "AMP_DTYPE_NAMES",
    "AUTOCAST",
    "ApiMove",
    "FLOAT16_NAMES",
    "LEGACY_AUTOCAST",
    "LEGACY_SCALER",
    "MOVES_FILE",
    "MoveTableError",
    "SCALER",
    "accelerator_name_for",
    "aliased_members",
    "as_keywords",
    "dtype_expr",
    "find_keyword",
    "import_to_drop",
    "is_float16",
    "is_reference",
    "keyword_arg",
    "load_moves",
    "mentions_cuda_literal",
    "mentions_float16",
    "parse_moves",
    "parse_version",
]

MOVES_FILE = "cuda_api.toml"
AMP_DTYPE_NAMES = {"bfloat16": "torch.bfloat16", "float16": "torch.float16"}

_ROW_KEYS = {
    "modules",
    "accelerator",
    "accelerator-safety",
    "accelerator-keywords",
    "accelerator-positional",
    "accelerator-note",
    "accelerator-no-device",
    "neuron-note",
}


@dataclass(frozen=True)
class ApiMove:
    """One row of cuda_api.toml: torch.cuda.<name> -> torch.neuron.<name>."""

    name: str
    # torch.cuda submodules that also export the name (torch.cuda.memory.empty_cache).
    modules: tuple[str, ...] = ()
    # ((min torch, qualified name), ...) sorted by version.
    accelerator: tuple[tuple[tuple[int, int], str], ...] = ()
    accelerator_unsafe: bool = False
    accelerator_keywords: frozenset[str] = frozenset()
    accelerator_positional: bool = True
    accelerator_note: str = ""
    # What the accelerator call stands for where no accelerator exists: "skip" (a call made for
    # its effect) or a Python literal it returns instead; "" when it needs no guard.
    accelerator_no_device: str = ""
    neuron_note: str = ""

    @property
    def cuda_names(self) -> tuple[str, ...]:
        return (f"torch.cuda.{self.name}", *(f"torch.cuda.{m}.{self.name}" for m in self.modules))

    @property
    def neuron_name(self) -> str:
        return f"torch.neuron.{self.name}"


class MoveTableError(ValueError):
    """cuda_api.toml is malformed (raised at import, like a malformed rule)."""


def parse_version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise MoveTableError(f"{MOVES_FILE}: bad torch version {text!r} (expected MAJOR.MINOR)")
    return int(major), int(minor)


@lru_cache(maxsize=1)
def load_moves() -> dict[str, ApiMove]:
    """Rows of the shipped cuda_api.toml keyed by every qualified CUDA name they cover."""
    return parse_moves((Path(__file__).parent / "cuda_api" / MOVES_FILE).read_text(encoding="utf-8"))


def parse_moves(text: str) -> dict[str, ApiMove]:
    """Parse a move table; a malformed one raises MoveTableError naming the row and problem."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MoveTableError(f"{MOVES_FILE}: {exc}") from exc
    rows: dict[str, ApiMove] = {}
    for name, row in raw.get("api", {}).items():
        unknown = set(row) - _ROW_KEYS
        if unknown:
            raise MoveTableError(f"{MOVES_FILE}: [api.{name}] has unknown keys {sorted(unknown)}")
        safety = row.get("accelerator-safety", "safe")
        if safety not in ("safe", "unsafe"):
            raise MoveTableError(f"{MOVES_FILE}: [api.{name}] accelerator-safety must be safe or unsafe")
        move = ApiMove(
            name=name,
            modules=tuple(row.get("modules", ())),
            accelerator=tuple(
                sorted((parse_version(v), q) for v, q in row.get("accelerator", {}).items())
            ),
            accelerator_unsafe=safety == "unsafe",
            accelerator_keywords=frozenset(row.get("accelerator-keywords", ())),
            accelerator_positional=bool(row.get("accelerator-positional", True)),
            accelerator_note=row.get("accelerator-note", ""),
            accelerator_no_device=_no_device_value(name, row.get("accelerator-no-device", "")),
            neuron_note=row.get("neuron-note", ""),
        )
        if not move.accelerator and not move.accelerator_note:
            raise MoveTableError(f"{MOVES_FILE}: [api.{name}] needs an accelerator name or note")
        for qualified in move.cuda_names:
            rows[qualified] = move
    return rows


def _no_device_value(name: str, value: str) -> str:
    if value in ("", "skip"):
        return value
    try:
        ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise MoveTableError(
            f"{MOVES_FILE}: [api.{name}] accelerator-no-device must be \"skip\" or a Python literal, not {value!r}"
        ) from None
    return value


def accelerator_name_for(move: ApiMove, min_torch: tuple[int, int]) -> str | None:
    """The accelerator spelling valid for every torch >= ``min_torch``, or None."""
    best = None
    for version, qualified in move.accelerator:
        if version <= min_torch:
            best = qualified
    return best


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
    """True when ``node`` reads the binding of its name (and so may resolve to an import)."""
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

    ``amp.autocast`` after ``from torch.cuda import amp`` -> (("torch.cuda", "amp"),);
    ``autocast`` after ``from torch.cuda.amp import autocast`` -> (("torch.cuda.amp", "autocast"),).
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
    if obj != head.value:
        # An `as` alias: `from module import obj as x` or `import module.obj as x`; the engine
        # finds the alias name and removes whichever exists, if unused.
        return ((module, obj), (qualified, None))
    return ((module, obj),)


def dtype_expr(rule: Rule) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
    """``torch.bfloat16`` / ``torch.float16`` per settings.amp_dtype, spelled with the user's alias."""
    return rule.spell(AMP_DTYPE_NAMES[rule.context.settings.amp_dtype])


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` without spaces around ``=`` (PEP 8 for keywords)."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


# -- AMP -------------------------------------------------------------------------------------

LEGACY_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
LEGACY_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
FLOAT16_NAMES = frozenset({"torch.float16", "torch.half"})


def as_keywords(call: cst.Call, params: tuple[str, ...]) -> list[cst.Arg] | None:
    """The call's arguments with positional ones turned into keywords named by ``params``.

    None when that is impossible (``*args``/``**kwargs`` or more positionals than parameters):
    the meaning of positions then cannot be read from the source.
    """
    out: list[cst.Arg] = []
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(params):
                return None
            # Keep the argument's own comma: comments after it live in the comma's whitespace.
            out.append(keyword_arg(params[position], arg.value).with_changes(comma=arg.comma))
            position += 1
        else:
            out.append(arg)
    return out


def find_keyword(args: list[cst.Arg], name: str) -> cst.Arg | None:
    for arg in args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def is_float16(rule: Rule, expr: cst.BaseExpression) -> bool:
    return rule.qualname(expr) in FLOAT16_NAMES


def mentions_cuda_literal(rule: Rule) -> bool:
    """Whether the module still holds a ``"cuda..."`` string literal (computed once per file)."""
    cached = getattr(rule, "_mentions_cuda", None)
    if cached is None:
        code = rule.context.source
        cached = "'cuda" in code or '"cuda' in code
        rule._mentions_cuda = cached  # type: ignore[attr-defined]
    return cached


def aliased_members(node: cst.ImportFrom, members: frozenset[str]) -> list[str]:
    """Local names that ``from torch... import member as alias`` binds to one of ``members``.

    Rules pre-filter Name nodes by their text (O(1)); an ``as`` alias would slip through that
    filter, so rules collect aliases as the import is visited (imports precede their uses).
    """
    if node.relative or isinstance(node.names, cst.ImportStar) or node.module is None:
        return []
    head = node.module
    while isinstance(head, cst.Attribute):
        head = head.value
    if not (isinstance(head, cst.Name) and head.value == "torch"):
        return []
    out = []
    for alias in node.names:
        if (
            alias.asname is not None
            and isinstance(alias.name, cst.Name)
            and alias.name.value in members
            and isinstance(alias.asname.name, cst.Name)
        ):
            out.append(alias.asname.name.value)
    return out


class MemberReferences:
    """Mix-in for rules about ``torch.cuda`` members: ``check_reference(node)`` is called for
    every Attribute or Name that may refer to one of ``members`` (last name components),
    through ``from torch.cuda import X as Y`` aliases too. The qualified-name test is the rule's."""

    members: frozenset[str] = frozenset()
    # Local names bound by `from torch... import <member> as <alias>` (see aliased_members).
    _aliases: frozenset[str] = frozenset()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in self.members:
            self.check_reference(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        for alias in aliased_members(node, self.members):
            self._aliases = self._aliases | {alias}

    def visit_Name(self, node: cst.Name) -> None:
        if (node.value in self.members or node.value in self._aliases) and is_reference(self, node):
            self.check_reference(node)

    def check_reference(self, node: cst.Attribute | cst.Name) -> None:
        raise NotImplementedError


_FLOAT16_WORDS = re.compile(r"float16|\bhalf\b")


def mentions_float16(rule: Rule) -> bool:
    """Whether the module mentions float16 (``torch.float16``, ``"float16"``, ``torch.half``, ``.half()``).

    Computed once per file. A GradScaler is only made a no-op where nothing in its file may run
    float16: unscaled float16 gradients underflow.
    """
    cached = getattr(rule, "_mentions_float16", None)
    if cached is None:
        cached = _FLOAT16_WORDS.search(rule.context.source) is not None
        rule._mentions_float16 = cached  # type: ignore[attr-defined]
    return cached
