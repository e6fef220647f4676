"""Makefiles and CMake files as the build rules read them.

``code`` is the file with its comments blanked (offsets kept): what the build rules search for
``nvcc``, CUDA flags and CUDA languages. A Makefile's recipe lines are shell, so ``text`` — the
shell view the launch-script rules read, as they read a Dockerfile's ``RUN`` lines — keeps them
(without the tab and the ``@`` / ``-`` / ``+`` recipe prefixes) and blanks everything else. CMake
has no shell lines (``execute_process`` arguments are not run by a shell): its shell view is blank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shell import ShellScript

__all__ = ["BuildFile", "parse_build"]

_CMAKE_BRACKET_COMMENT = re.compile(r"#\[(=*)\[.*?\]\1\]", re.DOTALL)


@dataclass
class BuildFile(ShellScript):
    """``text``: the shell view (recipes); ``raw``: the file; ``code``: the file without comments."""

    raw: str = ""
    code: str = ""
    path: str = ""
    flavour: str = "make"  # "make" or "cmake"


def _spaces(s: str) -> str:
    return re.sub(r"[^\n]", " ", s)


def _make(text: str) -> tuple[str, str]:
    """(code, shell view) of a Makefile. A recipe line starts with a tab (and a line after a
    recipe line ending in ``\\`` continues it)."""
    code: list[str] = []
    view: list[str] = []
    in_recipe = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if body.startswith("\t") or in_recipe:
            # A recipe line is shell: make hands it to the shell as it is, `#` included.
            prefix = len(body) - len(body.lstrip("\t@-+ ")) if body.startswith("\t") else 0
            code.append(body + ending)
            view.append(" " * prefix + body[prefix:] + ending)
            in_recipe = body.endswith("\\")
            continue
        comment = _make_comment(body)
        kept = body if comment is None else body[:comment] + _spaces(body[comment:])
        code.append(kept + ending)
        view.append(_spaces(body) + ending)
    return "".join(code), "".join(view)


def _make_comment(body: str) -> int | None:
    i = 0
    while True:
        i = body.find("#", i)
        if i == -1:
            return None
        if i == 0 or body[i - 1] != "\\":
            return i
        i += 1


def _cmake(text: str) -> str:
    """A CMake file with its comments blanked: ``#`` to the end of the line outside a quoted
    argument, and ``#[[ ... ]]`` bracket comments."""
    out = list(text)
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            i += 1
            continue
        if ch == "#":
            m = _CMAKE_BRACKET_COMMENT.match(text, i)
            end = m.end() if m else (text.find("\n", i) if text.find("\n", i) != -1 else n)
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
            continue
        i += 1
    return "".join(out)


def parse_build(text: str, path: str = "") -> BuildFile:
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if name == "cmakelists.txt" or name.endswith(".cmake"):
        return BuildFile(_spaces(text), raw=text, code=_cmake(text), path=path, flavour="cmake")
    code, view = _make(text)
    return BuildFile(view, raw=text, code=code, path=path, flavour="make")
