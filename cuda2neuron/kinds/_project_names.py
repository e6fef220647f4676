"""The CUDA-worded names the whole project defines, pooled from the bytes the project sweep reads.

The residual pass (CN902) judges one file at a time, so a name defined in another module of the
project looked like a CUDA reference: unsloth's tests call ``stack_mod._cuda_family_sm_range(...)``
on a module they load with importlib, patch ``"_maybe_fetch_windows_cudart"`` by its name and
look for ``"DeviceType.CUDA"`` (a member of the project's own enum). The sweep
(``workspace/_project.py``) already reads every Python file's bytes; ``NamePool`` reads the same
bytes, without a parse, for the names that hold a CUDA word: those a line defines (``def`` /
``class``, a module's assignment, an assignment or an annotated field in a class's body, which
is also that class's member ``Dev.CUDA``; never a function's local variable, a parameter on its
own line of a ``def`` nor a keyword on a call's line), the functions a shell script defines
(``read_shell``), and those an import from outside the project binds. Only words near a CUDA
word are looked at, so a file without one costs a search.

A name is the project's own only if it is defined and never imported from outside anywhere in
the project: ``from torch.cuda import ...`` in one module keeps the name foreign in every module,
even where another imports it from the first (a re-export).

What a file's result read of the pool is part of its cache key (``file_words``: the CUDA-worded
identifiers the file spells), so editing another module changes only the keys of the files that
spell a name whose standing changed (``workspace._cache``).
"""

from __future__ import annotations

import re

__all__ = ["NamePool", "file_words"]

_WORD_LIST = (b"cuda", b"nccl", b"cudnn", b"nvidia", b"nvcc")
_IDENT_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
# `cuda`, `_CUDA_`: the API's own word, never excused as a name of the project's (``_BARE`` of
# ``_leftover_python``); kept only as a class member (`Dev.CUDA`).
_BARE = re.compile(rb"_*(?:cuda|nccl|cudnn|nvidia|nvcc)_*", re.IGNORECASE)
_DEF = re.compile(rb"[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+(\w+)")
_ASSIGN = re.compile(rb"([ \t]*)(\w+)[ \t]*(?::[^=\n]+)?=(?!=)")
_CLASS = re.compile(rb"class[ \t]+(\w+)")
# A field a class's body declares by its annotation alone (a dataclass's `driver_cuda_version:
# tuple[int, int] | None`): a member as much as `has_rocm: bool = False` is (``_ASSIGN``).
_FIELD = re.compile(rb"([ \t]+)(\w+)[ \t]*:[ \t]*[^\s=#][^=\n]*$", re.MULTILINE)
# A shell function's definition: `make_mock_nvcc() {`, `function _has_usable_nvidia_gpu {`.
_SHELL_DEF = re.compile(rb"[ \t]*(?:function[ \t]+([A-Za-z_]\w*)|([A-Za-z_]\w*)[ \t]*\(\))")
# An import statement (a parenthesised name list over several lines included).
_IMPORT = re.compile(
    rb"[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b[ \t]*(\([^)]*\)|[^\n]*)|import[ \t]+([^\n#;]*))"
)


def _word_places(lowered: bytes) -> list[int]:
    places = []
    for word in _WORD_LIST:
        at = lowered.find(word)
        while at != -1:
            places.append(at)
            at = lowered.find(word, at + len(word))
    return places


def _identifier_at(data: bytes, at: int) -> tuple[int, int]:
    start, end = at, at
    while start > 0 and data[start - 1] in _IDENT_BYTES:
        start -= 1
    while end < len(data) and data[end] in _IDENT_BYTES:
        end += 1
    return start, end


def file_words(data: bytes) -> frozenset[str]:
    """The identifiers of ``data`` (code, strings and comments alike) that hold a CUDA word."""
    lowered = data.lower()
    out = set()
    for at in _word_places(lowered):
        start, end = _identifier_at(data, at)
        out.add(data[start:end].decode("ascii", "replace"))
    return frozenset(out)


class NamePool:
    """The names the files fed to it define and import from outside (see the module docstring)."""

    def __init__(self, own_tops: frozenset[str]) -> None:
        self.own_tops = own_tops
        self.defined: set[str] = set()
        self.foreign: set[str] = set()

    def read(self, data: bytes) -> None:
        lowered = data.lower()
        lines: set[int] = set()
        for at in _word_places(lowered):
            lines.add(data.rfind(b"\n", 0, at) + 1)
        if not lines:
            return
        lists = _name_lists(data) if b"import" in data else []
        for start in sorted(lines):
            self._line(data, start, lists)

    def read_shell(self, data: bytes) -> None:
        """The CUDA-worded functions a shell script defines (unsloth's test scripts call their
        own `make_mock_nvcc "12.4"`, its installer `if _has_usable_nvidia_gpu; then`): the
        project's names as much as a Python def is. Only lines with a CUDA word are looked at."""
        lowered = data.lower()
        for start in sorted({data.rfind(b"\n", 0, at) + 1 for at in _word_places(lowered)}):
            m = _SHELL_DEF.match(data, start)
            if m is not None:
                self._define(m.group(1) or m.group(2))

    def _line(self, data: bytes, start: int, lists: list[tuple[int, int]]) -> None:
        m = _DEF.match(data, start)
        if m is not None:
            self._define(m.group(1))
            return
        m = _IMPORT.match(data, start)
        if m is None:
            # A name inside `from pkg import (\n  a_cuda,\n)`: its statement starts lines above.
            for opened, closed in lists:
                if opened < start < closed:
                    statement = _IMPORT.match(data, data.rfind(b"\n", 0, opened) + 1)
                    if statement is not None:
                        self._import(statement)
            m = _ASSIGN.match(data, start) or _FIELD.match(data, start)
            if m is not None and not _continues_a_call(data, start):
                self._define(m.group(2), data, start, len(m.group(1)))
            return
        self._import(m)

    def _define(self, name: bytes, data: bytes = b"", start: int = 0, indent: int = 0) -> None:
        text = name.decode("ascii", "replace")
        if indent:
            # Only a class's member: a function's local variable (`cuda13 = make(...)` in a
            # test) names nothing another module can spell.
            owner = _enclosing_class(data, start, indent)
            if owner is None:
                return
            self.defined.add(f"{owner}.{text}")
        if not _BARE.fullmatch(name):
            self.defined.add(text)

    def _import(self, m: re.Match[bytes]) -> None:
        if m.group(4) is not None:  # import a.b, c as d
            for item in m.group(4).split(b","):
                parts = item.split()
                if not parts:
                    continue
                bound = parts[-1] if len(parts) == 3 and parts[1] == b"as" else parts[0].split(b".")[0]
                if parts[0].split(b".")[0].decode("ascii", "replace") not in self.own_tops:
                    self.foreign.add(bound.decode("ascii", "replace"))
            return
        if m.group(1) or m.group(2).split(b".")[0].decode("ascii", "replace") in self.own_tops:
            return  # the project's own module
        for item in m.group(3).strip(b"()").split(b","):
            parts = item.split()
            if parts:
                bound = parts[-1] if len(parts) == 3 and parts[1] == b"as" else parts[0]
                self.foreign.add(bound.decode("ascii", "replace"))


def _continues_a_call(data: bytes, start: int) -> bool:
    """Whether the line at ``start`` goes on from a line ending in ``(`` or ``,``: then
    ``nccl_port=self.nccl_port,`` is a keyword passed to a call (xtuner's engine arguments), not
    an assignment (no statement starts after an open bracket or a trailing comma)."""
    end = start - 1
    while end > 0:
        line_start = data.rfind(b"\n", 0, end) + 1
        line = data[line_start:end].split(b"#", 1)[0].rstrip()
        if line:
            return line.endswith((b"(", b","))
        end = line_start - 1
    return False


def _name_lists(data: bytes) -> list[tuple[int, int]]:
    """(opening, closing parenthesis) of each ``from pkg import (`` name list."""
    out = []
    for m in re.finditer(rb"import[ \t]*\(", data):
        close = data.find(b")", m.end())
        out.append((m.end() - 1, len(data) if close == -1 else close))
    return out


def _enclosing_class(data: bytes, start: int, indent: int) -> str | None:
    """The class whose body holds the assignment at ``start`` (indented ``indent``), when the
    first line above it with less indentation is a ``class`` line."""
    end = start - 1
    while end > 0:
        line_start = data.rfind(b"\n", 0, end) + 1
        line = data[line_start:end]
        stripped = line.lstrip(b" \t")
        if stripped and not stripped.startswith(b"#"):
            depth = len(line) - len(stripped)
            if depth < indent:
                m = _CLASS.match(stripped)
                return m.group(1).decode("ascii", "replace") if m else None
        end = line_start - 1
    return None
