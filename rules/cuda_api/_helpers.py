"""Helpers of the torch.cuda API family (CN2xx).

* The move table ``cuda_api.toml`` (next to this module) loaded once per process into frozen rows.
* ``aliased_members`` — ``as`` aliases of imported API names, for the rules' cheap Name filter;
  ``MemberReferences`` — the visitors built on it, shared by the torch.cuda member rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst

from .._shared.names import is_reference
from .._shared.tables import tomllib

__all__ = [
    "MemberReferences",
    "ApiMove",
    "MOVES_FILE",
    "MoveTableError",
    "accelerator_name_for",
    "aliased_members",
    "load_moves",
    "neuronx_release",
    "neuronx_text",
    "parse_moves",
    "parse_version",
]

MOVES_FILE = "cuda_api.toml"


_ROW_KEYS = {
    "modules",
    "accelerator",
    "accelerator-safety",
    "accelerator-keywords",
    "accelerator-positional",
    "accelerator-note",
    "accelerator-neuronx",
    "accelerator-no-device",
    "neuron-note",
    "neuron-member",
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
    # The torch-neuronx releases (one per torch family) from which the accelerator name works on
    # Trainium; () when any does.
    accelerator_neuronx: tuple[tuple[int, ...], ...] = ()
    # What the accelerator call stands for where no accelerator exists: "skip" (a call made for
    # its effect) or a Python literal it returns instead; "" when it needs no guard.
    accelerator_no_device: str = ""
    neuron_note: str = ""
    # The torch.neuron member when it is not ``name``: a deprecated CUDA alias moves to the API
    # it stands for (torch.cuda.memory_cached is torch.cuda.memory_reserved).
    neuron_member: str = ""

    @property
    def cuda_names(self) -> tuple[str, ...]:
        return (f"torch.cuda.{self.name}", *(f"torch.cuda.{m}.{self.name}" for m in self.modules))

    @property
    def neuron_name(self) -> str:
        return f"torch.neuron.{self.neuron_member or self.name}"


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
    return parse_moves(Path(__file__).with_name(MOVES_FILE).read_text(encoding="utf-8"))


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
            accelerator_neuronx=tuple(sorted(_neuronx_version(name, v) for v in row.get("accelerator-neuronx", ()))),
            accelerator_no_device=_no_device_value(name, row.get("accelerator-no-device", "")),
            neuron_note=row.get("neuron-note", ""),
            neuron_member=row.get("neuron-member", ""),
        )
        if not move.accelerator and not move.accelerator_note:
            raise MoveTableError(f"{MOVES_FILE}: [api.{name}] needs an accelerator name or note")
        for qualified in move.cuda_names:
            rows[qualified] = move
    return rows


def _neuronx_version(name: str, text: str) -> tuple[int, ...]:
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        raise MoveTableError(f"{MOVES_FILE}: [api.{name}] bad torch-neuronx version {text!r} (expected e.g. 2.14.3.1)")
    return tuple(int(p) for p in parts)


def neuronx_release(required: tuple[tuple[int, ...], ...], have: tuple[int, ...]) -> bool:
    """Whether torch-neuronx ``have`` is at least the release its torch family needs.

    One entry per family (2.13.3.1, 2.14.3.1): 2.14.3.0 is older than 2.14.3.1 although newer
    than 2.13.3.1. A family newer than every entry has the feature; one older than all does not.
    """
    for needed in required:
        if have[:2] == needed[:2]:
            return have >= needed
    return bool(required) and have[:2] > required[-1][:2]


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


def neuronx_text(required: tuple[tuple[int, ...], ...]) -> str:
    """``((2, 13, 3, 1), (2, 14, 3, 1))`` -> ``"2.13.3.1 / 2.14.3.1"``."""
    return " / ".join(".".join(map(str, v)) for v in required)


def accelerator_name_for(move: ApiMove, min_torch: tuple[int, int]) -> str | None:
    """The accelerator spelling valid for every torch >= ``min_torch``, or None."""
    best = None
    for version, qualified in move.accelerator:
        if version <= min_torch:
            best = qualified
    return best


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
